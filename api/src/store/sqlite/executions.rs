//! Agentflow executions: SqliteStore's [`ExecutionStore`].

use super::*;

#[async_trait]
impl ExecutionStore for SqliteStore {
    async fn get_execution(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Execution>> {
        self.read(move |conn| get_execution(conn, Some(workspace), id))
            .await
    }

    async fn find_public_execution(&self, id: Uuid) -> StoreResult<Option<Execution>> {
        self.read(move |conn| Ok(get_execution(conn, None, id)?.filter(|found| found.is_public)))
            .await
    }

    async fn latest_execution(
        &self,
        agentflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<Execution>> {
        let session_id = session_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions e
                 WHERE e.agentflow_id = ?1 AND e.session_id = ?2
                 ORDER BY e.created_at DESC, e.seq DESC LIMIT 1"
            ))?;
            stmt.query_row(
                params![agentflow.to_string(), session_id],
                execution_from_row,
            )
            .optional()
        })
        .await
    }

    async fn list_executions(
        &self,
        workspace: Uuid,
        filter: &ExecutionFilter,
        page: Page,
    ) -> StoreResult<Listing<ListedExecution>> {
        let filter = filter.clone();
        self.read(move |conn| {
            let (conditions, params) =
                sql::execution_conditions(sql::Dialect::Sqlite, workspace, &filter);
            let mut args: Vec<Value> = params.into_iter().map(sqlite_value).collect();
            // The chatflow is joined for counting only when its name is filtered on.
            let name_join = if filter.agentflow_name.is_some() {
                "JOIN chatflows c ON c.id = e.agentflow_id"
            } else {
                ""
            };
            let total: i64 = conn
                .prepare_cached(&format!(
                    "SELECT COUNT(*) FROM executions e {name_join} WHERE {conditions}"
                ))?
                .query_row(rusqlite::params_from_iter(&args), |r| r.get(0))?;
            let n = args.len();
            args.push(Value::Integer(i64::from(page.limit)));
            args.push(Value::Integer(
                i64::try_from(page.offset()).unwrap_or(i64::MAX),
            ));
            let items = conn
                .prepare_cached(&format!(
                    "SELECT {EXECUTION_COLUMNS}, c.name FROM executions e
                     JOIN chatflows c ON c.id = e.agentflow_id
                     WHERE {conditions}
                     ORDER BY e.updated_at DESC, e.seq DESC LIMIT ?{} OFFSET ?{}",
                    n + 1,
                    n + 2
                ))?
                .query_map(rusqlite::params_from_iter(&args), |row| {
                    let execution = execution_from_row(row)?;
                    Ok(ListedExecution {
                        agentflow: AgentflowRef {
                            id: execution.agentflow_id,
                            name: row.get(EXECUTION_COLUMN_COUNT)?,
                        },
                        execution,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Listing {
                items,
                total: u64::try_from(total).unwrap_or(0),
            })
        })
        .await
    }

    async fn set_execution_public(
        &self,
        workspace: Uuid,
        id: Uuid,
        public: bool,
    ) -> StoreResult<Option<Execution>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let Some(mut found) = get_execution(&tx, Some(workspace), id)? else {
                return Ok(None);
            };
            found.is_public = public;
            found.updated_date = time::now();
            write_execution(&tx, &found)?;
            tx.commit()?;
            Ok(Some(found))
        })
        .await
    }

    async fn delete_executions(&self, workspace: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let mut deleted = 0;
            for id in ids {
                deleted += tx
                    .prepare_cached("DELETE FROM executions WHERE id = ?1 AND workspace_id = ?2")?
                    .execute(params![id, workspace.to_string()])?;
            }
            tx.commit()?;
            Ok(deleted as u64)
        })
        .await
    }
}
