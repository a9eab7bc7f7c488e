//! SQL databases a flow reads (`sqlDatabaseChain`): SQLite files under the
//! server's `SQL_DATABASE_DIR`, and PostgreSQL servers behind the request
//! tools' address guard. Every query is read only (a read-only SQLite
//! connection with `query_only` and no `ATTACH`; a `READ ONLY` PostgreSQL
//! transaction), one statement (a second is refused before anything runs),
//! at most [`MAX_ROWS`] rows, within `SQL_QUERY_TIMEOUT_MS`. Tables are
//! described as LangChain's `SqlDatabase` describes them (`CREATE TABLE`, a
//! sample query and its rows), so prompts written for Flowise read the same.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::flow::component::{SqlDatabase, TableFilter};
use crate::netguard::AddressPolicy;

/// Rows a query gives at most (the rest are dropped).
pub const MAX_ROWS: usize = 1000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens databases for flows, with the server's rules.
#[derive(Clone)]
pub struct SqlClient {
    policy: Arc<AddressPolicy>,
    sqlite_dir: PathBuf,
    timeout: Duration,
}

/// One open database.
pub enum SqlConnection {
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
    Postgres(tokio_postgres::Client),
}

/// A table's columns: name, type, and whether it may hold null.
struct Table {
    name: String,
    columns: Vec<(String, String, bool)>,
}

impl SqlClient {
    pub fn new(policy: AddressPolicy, sqlite_dir: PathBuf, timeout: Duration) -> Self {
        SqlClient {
            policy: Arc::new(policy),
            sqlite_dir,
            timeout,
        }
    }

    /// Connects to the database, or says why it may not or cannot.
    pub async fn open(&self, database: &SqlDatabase) -> Result<SqlConnection, String> {
        match database {
            SqlDatabase::Sqlite(path) => self.open_sqlite(path).await,
            SqlDatabase::Postgres(url) => self.open_postgres(url).await,
        }
    }

    async fn open_sqlite(&self, written: &str) -> Result<SqlConnection, String> {
        let path = sqlite_path(&self.sqlite_dir, written)?;
        let connection = tokio::task::spawn_blocking(move || {
            use rusqlite::OpenFlags;
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = rusqlite::Connection::open_with_flags(&path, flags)
                .map_err(|e| format!("the SQLite database cannot be opened: {e}"))?;
            conn.pragma_update(None, "query_only", true)
                .and_then(|_| conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0))
                .map_err(|e| format!("the SQLite database cannot be made read only: {e}"))?;
            Ok::<_, String>(conn)
        })
        .await
        .map_err(|e| format!("the SQLite database cannot be opened: {e}"))??;
        Ok(SqlConnection::Sqlite(Arc::new(Mutex::new(connection))))
    }

    async fn open_postgres(&self, written: &str) -> Result<SqlConnection, String> {
        let url = if written.contains("://") {
            written.to_owned()
        } else {
            format!("postgres://{written}")
        };
        // The URL holds a password: errors never repeat it.
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|_| "the PostgreSQL URL cannot be read".to_owned())?;
        if !config.get_hostaddrs().is_empty() {
            return Err("the PostgreSQL URL may not set hostaddr".into());
        }
        let host = match config.get_hosts() {
            [tokio_postgres::config::Host::Tcp(host)] => host.clone(),
            [] => return Err("the PostgreSQL URL names no host".into()),
            [_] => return Err("the PostgreSQL URL names a socket; give a host".into()),
            _ => return Err("the PostgreSQL URL names more than one host".into()),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let address = self.checked_address(&host, port).await?;
        config
            .hostaddr(address)
            .connect_timeout(CONNECT_TIMEOUT)
            .application_name("weir");
        let connect = config.connect(tokio_postgres::NoTls);
        let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| format!("PostgreSQL at {host}:{port} did not answer in time"))?
            .map_err(|e| format!("PostgreSQL at {host}:{port} refused the connection: {e}"))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a flow's PostgreSQL connection ended");
            }
        });
        Ok(SqlConnection::Postgres(client))
    }

    /// The address to connect to: each one the host resolves to must pass
    /// the guard, and the connection goes to the one checked.
    async fn checked_address(&self, host: &str, port: u16) -> Result<IpAddr, String> {
        let found: Vec<IpAddr> = match crate::netguard::host_ip(host) {
            Some(ip) => vec![ip],
            None => tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| format!("{host} cannot be resolved: {e}"))?
                .map(|a| a.ip())
                .collect(),
        };
        if let Some(why) = found.iter().find_map(|ip| self.policy.refuse(*ip)) {
            return Err(format!(
                "PostgreSQL at {host} may not be reached: {why} (see ALLOW_PRIVATE_REQUESTS)"
            ));
        }
        found
            .first()
            .copied()
            .ok_or_else(|| format!("{host} resolves to no address"))
    }

    /// The tables the filter keeps, described as LangChain does.
    pub async fn table_info(
        &self,
        connection: &SqlConnection,
        filter: &TableFilter,
    ) -> Result<String, String> {
        let tables = match connection {
            SqlConnection::Sqlite(conn) => {
                let conn = Arc::clone(conn);
                self.blocking(&conn, sqlite_tables).await?
            }
            SqlConnection::Postgres(client) => postgres_tables(client).await?,
        };
        let tables = keep(tables, filter)?;
        let mut described = Vec::with_capacity(tables.len());
        for table in tables {
            let qualified = match connection {
                SqlConnection::Sqlite(_) => quoted(&table.name),
                SqlConnection::Postgres(_) => format!("\"public\".{}", quoted(&table.name)),
            };
            let sample = format!("SELECT * FROM {qualified} LIMIT {}", filter.sample_rows);
            let rows = if filter.sample_rows == 0 {
                Vec::new()
            } else {
                self.query(connection, &sample).await?
            };
            described.push(describe(&table, &qualified, &sample, &rows));
        }
        Ok(described.join("\n"))
    }

    /// Runs one read-only statement: its rows as objects (column → value).
    pub async fn query(
        &self,
        connection: &SqlConnection,
        sql: &str,
    ) -> Result<Vec<Map<String, Value>>, String> {
        let sql = sql.trim().trim_end_matches(';').trim().to_owned();
        if sql.is_empty() {
            return Err("there is no SQL statement to run".into());
        }
        match connection {
            SqlConnection::Sqlite(conn) => {
                let conn = Arc::clone(conn);
                self.blocking(&conn, move |c| sqlite_query(c, &sql)).await
            }
            SqlConnection::Postgres(client) => {
                let run = postgres_query(client, &sql, self.timeout);
                match tokio::time::timeout(self.timeout + Duration::from_secs(1), run).await {
                    Ok(rows) => rows,
                    Err(_) => Err(self.too_long()),
                }
            }
        }
    }

    fn too_long(&self) -> String {
        format!(
            "the query ran past its {} ms limit (SQL_QUERY_TIMEOUT_MS) and was stopped",
            self.timeout.as_millis()
        )
    }

    /// Runs SQLite work off the async threads, interrupted at the timeout.
    async fn blocking<T: Send + 'static>(
        &self,
        conn: &Arc<Mutex<rusqlite::Connection>>,
        work: impl FnOnce(&rusqlite::Connection) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let interrupt = match conn.lock() {
            Ok(c) => c.get_interrupt_handle(),
            Err(_) => return Err("the SQLite connection is broken".into()),
        };
        let conn = Arc::clone(conn);
        let task = tokio::task::spawn_blocking(move || match conn.lock() {
            Ok(c) => work(&c),
            Err(_) => Err("the SQLite connection is broken".into()),
        });
        match tokio::time::timeout(self.timeout, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(format!("the SQLite query failed: {e}")),
            Err(_) => {
                interrupt.interrupt();
                Err(self.too_long())
            }
        }
    }
}

/// The SQLite file a node names: relative to `dir`, or inside it, after
/// links are followed (so neither `..` nor a link leads out).
fn sqlite_path(dir: &Path, written: &str) -> Result<PathBuf, String> {
    let root = dir.canonicalize().map_err(|_| {
        format!(
            "SQLite databases are read from SQL_DATABASE_DIR ({}), which does not exist",
            dir.display()
        )
    })?;
    let wanted = Path::new(written.trim());
    let joined = if wanted.is_absolute() {
        wanted.to_path_buf()
    } else {
        root.join(wanted)
    };
    let path = joined
        .canonicalize()
        .map_err(|_| format!("there is no SQLite database '{written}' in SQL_DATABASE_DIR"))?;
    if !path.starts_with(&root) || !path.is_file() {
        return Err(format!(
            "'{written}' is not a file inside SQL_DATABASE_DIR; weir opens SQLite databases \
             only from there"
        ));
    }
    Ok(path)
}

fn sqlite_tables(conn: &rusqlite::Connection) -> Result<Vec<Table>, String> {
    let mut statement = conn
        .prepare(
            "SELECT m.name, p.name, p.type, p.\"notnull\" FROM sqlite_master AS m \
             JOIN pragma_table_info(m.name) AS p \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid",
        )
        .map_err(|e| format!("the tables cannot be listed: {e}"))?;
    let rows = statement
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, bool>(3)?,
            ))
        })
        .map_err(|e| format!("the tables cannot be listed: {e}"))?;
    let mut columns = Vec::new();
    for row in rows {
        columns.push(row.map_err(|e| format!("the tables cannot be listed: {e}"))?);
    }
    Ok(group(columns))
}

async fn postgres_tables(client: &tokio_postgres::Client) -> Result<Vec<Table>, String> {
    let rows = client
        .query(
            "SELECT c.table_name::text, c.column_name::text, c.data_type::text, \
             c.is_nullable = 'NO' FROM information_schema.columns AS c \
             JOIN information_schema.tables AS t \
             ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
             WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' \
             ORDER BY c.table_name, c.ordinal_position",
            &[],
        )
        .await
        .map_err(|e| format!("the tables cannot be listed: {e}"))?;
    let columns = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get::<_, String>(0)?,
                r.try_get::<_, String>(1)?,
                r.try_get::<_, String>(2)?,
                r.try_get::<_, bool>(3)?,
            ))
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(|e| format!("the tables cannot be listed: {e}"))?;
    Ok(group(columns))
}

/// Rows of (table, column, type, not null), in table order, as tables.
fn group(columns: Vec<(String, String, String, bool)>) -> Vec<Table> {
    let mut tables: Vec<Table> = Vec::new();
    for (table, column, kind, not_null) in columns {
        match tables.last_mut() {
            Some(last) if last.name == table => last.columns.push((column, kind, not_null)),
            _ => tables.push(Table {
                name: table,
                columns: vec![(column, kind, not_null)],
            }),
        }
    }
    tables
}

/// The tables a filter keeps; a table it names that the database lacks is an
/// error, as in LangChain.
fn keep(tables: Vec<Table>, filter: &TableFilter) -> Result<Vec<Table>, String> {
    for wanted in filter.include.iter().chain(&filter.ignore) {
        if !tables.iter().any(|t| &t.name == wanted) {
            return Err(format!("the database has no table '{wanted}'"));
        }
    }
    Ok(tables
        .into_iter()
        .filter(|t| filter.include.is_empty() || filter.include.contains(&t.name))
        .filter(|t| !filter.ignore.contains(&t.name))
        .collect())
}

/// One table as LangChain's `SqlDatabase` describes it.
fn describe(table: &Table, qualified: &str, sample: &str, rows: &[Map<String, Value>]) -> String {
    let columns: Vec<String> = table
        .columns
        .iter()
        .map(|(name, kind, not_null)| {
            let kind = kind.to_uppercase();
            if *not_null {
                format!("{name} {kind} NOT NULL")
            } else {
                format!("{name} {kind}")
            }
        })
        .collect();
    let mut text = format!(
        "CREATE TABLE {qualified} (\n{}) \n{sample};\n",
        columns.join(", ")
    );
    for (name, _, _) in &table.columns {
        text.push(' ');
        text.push_str(name);
    }
    text.push('\n');
    for row in rows {
        for (name, _, _) in &table.columns {
            text.push(' ');
            match row.get(name) {
                Some(Value::String(s)) => text.push_str(s),
                Some(other) => text.push_str(&other.to_string()),
                None => text.push_str("null"),
            }
        }
        text.push('\n');
    }
    text
}

/// `name` as a quoted identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn sqlite_query(conn: &rusqlite::Connection, sql: &str) -> Result<Vec<Map<String, Value>>, String> {
    use rusqlite::types::ValueRef;
    let mut statement = conn.prepare(sql).map_err(|e| match e {
        rusqlite::Error::MultipleStatement => {
            "weir runs one SQL statement at a time, and this is more than one".to_owned()
        }
        other => other.to_string(),
    })?;
    if !statement.readonly() {
        return Err("weir runs only statements that read the database".into());
    }
    let names: Vec<String> = statement
        .column_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut rows = statement.query([]).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        if out.len() == MAX_ROWS {
            break;
        }
        let mut record = Map::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let value = match row.get_ref(i).map_err(|e| e.to_string())? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => Value::from(n),
                ValueRef::Real(x) => {
                    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
                }
                ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::from(format!("<{} bytes>", b.len())),
            };
            record.insert(name.clone(), value);
        }
        out.push(record);
    }
    Ok(out)
}

async fn postgres_query(
    client: &tokio_postgres::Client,
    sql: &str,
    timeout: Duration,
) -> Result<Vec<Map<String, Value>>, String> {
    // A READ ONLY transaction cannot be made to write once a query ran in it,
    // and a statement prepared from the subquery is one statement: a second
    // one (`…; COMMIT; DROP …`) is refused by the server before anything runs.
    client
        .batch_execute(&format!(
            "BEGIN READ ONLY; SET LOCAL statement_timeout = {}",
            timeout.as_millis()
        ))
        .await
        .map_err(|e| e.to_string())?;
    let wrapped = format!("SELECT row_to_json(q)::text FROM ({sql}\n) AS q LIMIT {MAX_ROWS}");
    let result = client.query(&wrapped, &[]).await;
    // The transaction only read: rolling it back changes nothing.
    let _ended = client.batch_execute("ROLLBACK").await;
    let rows = result.map_err(|e| match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    })?;
    rows.iter()
        .map(|row| {
            let text: String = row.try_get(0).map_err(|e| e.to_string())?;
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(record)) => Ok(record),
                _ => Err("PostgreSQL sent a row weir cannot read".into()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            name: "customers".into(),
            columns: vec![
                ("name".into(), "text".into(), true),
                ("city".into(), "text".into(), false),
            ],
        }
    }

    #[test]
    fn tables_are_described_as_langchain_does() {
        let mut row = Map::new();
        row.insert("name".into(), Value::from("Ada"));
        row.insert("city".into(), Value::Null);
        let text = describe(
            &table(),
            "\"customers\"",
            "SELECT * FROM \"customers\" LIMIT 3",
            &[row],
        );
        assert_eq!(
            text,
            "CREATE TABLE \"customers\" (\nname TEXT NOT NULL, city TEXT) \n\
             SELECT * FROM \"customers\" LIMIT 3;\n name city\n Ada null\n"
        );
    }

    #[test]
    fn filters_keep_and_drop_tables_and_name_the_unknown() {
        let filter = TableFilter {
            include: vec!["customers".into()],
            ..TableFilter::default()
        };
        assert_eq!(keep(vec![table()], &filter).map(|t| t.len()), Ok(1));
        let filter = TableFilter {
            ignore: vec!["customers".into()],
            ..TableFilter::default()
        };
        assert_eq!(keep(vec![table()], &filter).map(|t| t.len()), Ok(0));
        let filter = TableFilter {
            include: vec!["orders".into()],
            ..TableFilter::default()
        };
        let Err(why) = keep(vec![table()], &filter) else {
            panic!("an unknown table was accepted");
        };
        assert!(why.contains("orders"));
    }

    #[test]
    fn sqlite_files_stay_inside_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("shop.db");
        std::fs::write(&inside, b"").unwrap();
        assert!(sqlite_path(dir.path(), "shop.db").is_ok());
        assert!(sqlite_path(dir.path(), inside.to_str().unwrap()).is_ok());
        let outside = tempfile::NamedTempFile::new().unwrap();
        assert!(sqlite_path(dir.path(), outside.path().to_str().unwrap()).is_err());
        assert!(sqlite_path(dir.path(), "../etc/passwd").is_err());
        assert!(sqlite_path(dir.path(), "missing.db").is_err());
        assert!(sqlite_path(&dir.path().join("nowhere"), "shop.db").is_err());
    }
}
