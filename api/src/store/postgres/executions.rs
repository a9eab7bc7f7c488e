//! Agentflow executions: PostgresStore's [`ExecutionStore`].

use super::*;

#[async_trait]
impl ExecutionStore for PostgresStore {
    async fn get_execution(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Execution>> {
        let client = self.client().await?;
        get_execution(&client, Some(workspace), id, false).await
    }

    async fn find_public_execution(&self, id: Uuid) -> StoreResult<Option<Execution>> {
        let client = self.client().await?;
        Ok(get_execution(&client, None, id, false)
            .await?
            .filter(|found| found.is_public))
    }

    async fn latest_execution(
        &self,
        agentflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<Execution>> {
        self.query_opt(
            &format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions e
                 WHERE e.agentflow_id = $1 AND e.session_id = $2
                 ORDER BY e.created_at DESC, e.seq DESC LIMIT 1"
            ),
            &[&agentflow, &session_id],
            execution_from_row,
        )
        .await
    }

    async fn list_executions(
        &self,
        workspace: Uuid,
        filter: &ExecutionFilter,
        page: Page,
    ) -> StoreResult<Listing<ListedExecution>> {
        let (conditions, params) =
            sql::execution_conditions(sql::Dialect::Postgres, workspace, filter);
        let args: Vec<Arg> = params.into_iter().map(postgres_arg).collect();
        // The chatflow is joined for counting only when its name is filtered on.
        let name_join = if filter.agentflow_name.is_some() {
            "JOIN chatflows c ON c.id = e.agentflow_id"
        } else {
            ""
        };
        let count_sql = format!("SELECT COUNT(*) FROM executions e {name_join} WHERE {conditions}");
        let n = args.len();
        let page_sql = format!(
            "SELECT {EXECUTION_COLUMNS}, c.name FROM executions e
             JOIN chatflows c ON c.id = e.agentflow_id
             WHERE {conditions}
             ORDER BY e.updated_at DESC, e.seq DESC LIMIT ${} OFFSET ${}",
            n + 1,
            n + 2
        );
        let client = self.client().await?;
        let (count, stmt) = futures_util::future::try_join(
            client.prepare_cached(&count_sql),
            client.prepare_cached(&page_sql),
        )
        .await
        .map_err(backend)?;
        let limit = i64::from(page.limit);
        let offset = i64::try_from(page.offset()).unwrap_or(i64::MAX);
        let filter_args: Vec<&(dyn ToSql + Sync)> =
            args.iter().map(|a| &**a as &(dyn ToSql + Sync)).collect();
        let mut page_args = filter_args.clone();
        page_args.extend([&limit as &(dyn ToSql + Sync), &offset]);
        // Both queries go out together on the one connection (pipelined).
        let (total, rows) = futures_util::future::try_join(
            client.query_one(&count, &filter_args),
            client.query(&stmt, &page_args),
        )
        .await
        .map_err(backend)?;
        let total: i64 = total.try_get(0).map_err(backend)?;
        let items = rows
            .iter()
            .map(|row| {
                let execution = execution_from_row(row)?;
                Ok(ListedExecution {
                    agentflow: AgentflowRef {
                        id: execution.agentflow_id,
                        name: row.try_get(EXECUTION_COLUMN_COUNT)?,
                    },
                    execution,
                })
            })
            .collect::<PgResult<_>>()
            .map_err(backend)?;
        Ok(Listing {
            items,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    async fn set_execution_public(
        &self,
        workspace: Uuid,
        id: Uuid,
        public: bool,
    ) -> StoreResult<Option<Execution>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let Some(mut found) = get_execution(&tx, Some(workspace), id, true).await? else {
            return Ok(None);
        };
        found.is_public = public;
        found.updated_date = time::now();
        write_execution(&tx, &found).await?;
        tx.commit().await.map_err(backend)?;
        Ok(Some(found))
    }

    async fn delete_executions(&self, workspace: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        self.execute(
            "DELETE FROM executions WHERE workspace_id = $1 AND id = ANY($2)",
            &[&workspace, &ids],
        )
        .await
    }
}
