//! Triggers, their firings and results, webhook deliveries (replay protection) and the failure-mail outbox: SqliteStore's [`TriggerStore`].

use super::*;

#[async_trait]
impl TriggerStore for SqliteStore {
    async fn create_trigger(
        &self,
        trigger: Trigger,
        max_in_workspace: u64,
    ) -> StoreResult<Trigger> {
        let conflict = trig::address_taken(&trigger.node_id);
        let created = self
            .call(move |conn| {
                // One writer: the count and the insert cannot interleave with another's.
                let count: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM triggers WHERE workspace_id = ?1",
                    [trigger.workspace_id.to_string()],
                    |r| r.get(0),
                )?;
                if u64::try_from(count).unwrap_or(0) >= max_in_workspace {
                    return Ok(None);
                }
                write_trigger(
                    conn,
                    &format!(
                        "INSERT INTO triggers ({TRIGGER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,
                           ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
                           ?22, ?23, ?24, ?25, ?26)"
                    ),
                    &trigger,
                )?;
                Ok(Some(trigger))
            })
            .await
            .map_err(conflict_as(conflict))?;
        created.ok_or_else(|| StoreError::Conflict(trig::quota_reached(max_in_workspace)))
    }

    async fn get_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Trigger>> {
        self.read(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = ?1 AND workspace_id = ?2"
                ),
                params![id.to_string(), workspace.to_string()],
                trigger_from_row,
            )
            .optional()
        })
        .await
    }

    async fn owned_trigger(&self, workspace: Uuid, chatflow: Uuid) -> StoreResult<Option<Trigger>> {
        self.read(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {TRIGGER_COLUMNS} FROM triggers
                     WHERE chatflow_id = ?1 AND workspace_id = ?2 AND owned_by_chatflow = 1"
                ),
                params![chatflow.to_string(), workspace.to_string()],
                trigger_from_row,
            )
            .optional()
        })
        .await
    }

    async fn list_triggers(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Trigger>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM triggers WHERE workspace_id = ?1",
                &format!(
                    "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE workspace_id = ?1
                     ORDER BY created_at DESC, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
                page,
                trigger_from_row,
            )
        })
        .await
    }

    async fn update_trigger(&self, trigger: &Trigger) -> StoreResult<bool> {
        let conflict = trig::address_taken(&trigger.node_id);
        let t = trigger.clone();
        self.call(move |conn| {
            conn.execute(
                "UPDATE triggers SET name = ?3, chatflow_id = ?4, node_id = ?5, cron_expression = ?6,
                   timezone = ?7, enabled = ?8, webhook_platform = ?9, webhook_secret = ?10,
                   webhook_bot_token = ?11, trigger_message = ?12, max_executions = ?13,
                   timeout_secs = ?14, next_execution = ?15, notification_email = ?16,
                   updated_at = ?17, ends_at = ?18, response_mode = ?19, callback_url = ?20,
                   callback_secret = ?21
                 WHERE id = ?1 AND workspace_id = ?2",
                params![
                    t.id.to_string(),
                    t.workspace_id.to_string(),
                    t.name,
                    t.chatflow_id.to_string(),
                    t.node_id,
                    t.cron_expression,
                    t.timezone,
                    t.enabled,
                    t.webhook_platform,
                    t.webhook_secret,
                    t.webhook_bot_token,
                    t.trigger_message,
                    t.max_executions,
                    t.timeout,
                    t.next_execution.as_ref().map(to_millis),
                    t.notification_email,
                    to_millis(&t.updated_date),
                    t.ends_at.as_ref().map(to_millis),
                    t.response_mode(),
                    t.callback_url,
                    t.callback_secret,
                ],
            )
            .map(|n| n > 0)
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn delete_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM triggers WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn find_webhook_triggers(&self, address: &str) -> StoreResult<Vec<Trigger>> {
        let address = address.to_owned();
        let id = Uuid::parse_str(&address).ok().map(|id| id.to_string());
        self.read(move |conn| {
            if let Some(id) = id {
                let found = conn
                    .query_row(
                        &format!(
                            "SELECT {TRIGGER_COLUMNS} FROM triggers
                             WHERE id = ?1 AND type = 'webhook' AND owned_by_chatflow = 0"
                        ),
                        [id],
                        trigger_from_row,
                    )
                    .optional()?;
                if let Some(found) = found {
                    return Ok(vec![found]);
                }
            }
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE node_id = ?1 AND type = 'webhook' AND owned_by_chatflow = 0
                 ORDER BY created_at, id LIMIT 2"
            ))?;
            stmt.query_map([address], trigger_from_row)?.collect()
        })
        .await
    }

    async fn triggers_with_secrets_not_sealed_by(
        &self,
        sealed_prefix: &str,
    ) -> StoreResult<Vec<Trigger>> {
        let prefix = sealed_prefix.to_owned();
        self.read(move |conn| {
            // A NULL field compares as NULL: only set values are looked at.
            let mut stmt = conn.prepare(&format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE substr(webhook_secret, 1, length(?1)) <> ?1
                    OR substr(webhook_bot_token, 1, length(?1)) <> ?1
                    OR substr(callback_secret, 1, length(?1)) <> ?1"
            ))?;
            stmt.query_map([prefix], trigger_from_row)?.collect()
        })
        .await
    }

    async fn replace_trigger_secrets(&self, old: &Trigger, new: &Trigger) -> StoreResult<bool> {
        let id = old.id.to_string();
        let (old, new) = (old.clone(), new.clone());
        self.call(move |conn| {
            conn.execute(
                "UPDATE triggers SET webhook_secret = ?2, webhook_bot_token = ?3, callback_secret = ?4
                 WHERE id = ?1 AND webhook_secret IS ?5 AND webhook_bot_token IS ?6
                   AND callback_secret IS ?7",
                params![
                    id,
                    new.webhook_secret,
                    new.webhook_bot_token,
                    new.callback_secret,
                    old.webhook_secret,
                    old.webhook_bot_token,
                    old.callback_secret
                ],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn next_cron_due(&self) -> StoreResult<Option<Timestamp>> {
        self.read(|conn| {
            conn.query_row(
                "SELECT MIN(next_execution) FROM triggers WHERE type = 'cron' AND enabled = 1",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map(|ms| ms.map(from_millis))
        })
        .await
    }

    async fn claim_due_triggers(
        &self,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        limit: u32,
        plan: ClaimPlanner,
    ) -> StoreResult<Vec<Firing>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let due: Vec<Trigger> = tx
                .prepare_cached(&format!(
                    "SELECT {TRIGGER_COLUMNS} FROM triggers
                     WHERE type = 'cron' AND enabled = 1 AND next_execution <= ?1
                     ORDER BY next_execution LIMIT ?2"
                ))?
                .query_map(params![to_millis(&now), i64::from(limit)], trigger_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            let mut firings = Vec::new();
            for mut trigger in due {
                let decision = plan(&trigger, now);
                if decision.missed > 0 {
                    insert_result(
                        &tx,
                        trig::missed_result(&trigger, now, decision.missed),
                        u32::MAX,
                    )?;
                }
                trigger.advance(&decision, now);
                if let Some(at) = decision.run_at {
                    let firing = Firing {
                        id: Uuid::new_v4(),
                        trigger: trigger.clone(),
                        scheduled_at: at,
                        is_cron: true,
                        leased: true,
                    };
                    insert_firing(
                        &tx,
                        &firing,
                        owner,
                        lease_until,
                        &trigger.cron_input(),
                        &trigger.chat_id_at(at),
                    )?;
                    firings.push(firing);
                }
                tx.prepare_cached(
                    "UPDATE triggers SET execution_count = ?2, last_executed = ?3, enabled = ?4,
                       next_execution = ?5 WHERE id = ?1",
                )?
                .execute(params![
                    trigger.id.to_string(),
                    trigger.execution_count,
                    trigger.last_executed.as_ref().map(to_millis),
                    trigger.enabled,
                    trigger.next_execution.as_ref().map(to_millis),
                ])?;
            }
            tx.commit()?;
            Ok(firings)
        })
        .await
    }

    async fn claim_webhook_firings(
        &self,
        claims: Vec<FiringClaim>,
    ) -> Vec<StoreResult<Option<Firing>>> {
        self.write_each(claims, claim_webhook_firing, |_| Ok(()))
            .await
    }

    async fn firing_exists(&self, firing: Uuid) -> StoreResult<bool> {
        self.read(move |conn| {
            conn.query_row(
                "SELECT 1 FROM trigger_firings WHERE id = ?1",
                [firing.to_string()],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
        })
        .await
    }

    async fn renew_leases(
        &self,
        owner: Uuid,
        firings: &[Uuid],
        lease_until: Timestamp,
    ) -> StoreResult<()> {
        if firings.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = firings.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let sql = format!(
                "UPDATE trigger_firings SET lease_until = ? WHERE owner = ? AND id IN ({})",
                placeholders(ids.len())
            );
            let mut values: Vec<rusqlite::types::Value> =
                vec![to_millis(&lease_until).into(), owner.to_string().into()];
            values.extend(ids.into_iter().map(rusqlite::types::Value::from));
            conn.execute(&sql, rusqlite::params_from_iter(values))?;
            Ok(())
        })
        .await
    }

    async fn finish_firings(
        &self,
        ends: Vec<FiringEnd>,
    ) -> Vec<StoreResult<Option<TriggerResult>>> {
        let trim = trim_once_per_trigger(&ends);
        self.write_each(ends, finish_firing, trim).await
    }

    async fn expire_firings(&self, now: Timestamp, keep: u32) -> StoreResult<u64> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let expired: Vec<(String, i64, bool, String, String, String, Trigger)> = tx
                .prepare_cached(&format!(
                    "SELECT f.id, f.scheduled_at, f.is_cron, f.input, f.chat_id, c.name, {}
                     FROM trigger_firings f JOIN triggers t ON t.id = f.trigger_id
                     JOIN chatflows c ON c.id = t.chatflow_id
                     WHERE f.lease_until < ?1",
                    prefixed("t", TRIGGER_COLUMNS)
                ))?
                .query_map([to_millis(&now)], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        trigger_at(r, 6)?,
                    ))
                })?
                .collect::<rusqlite::Result<_>>()?;
            let count = expired.len() as u64;
            for (id, scheduled, is_cron, input, chat_id, flow_name, trigger) in expired {
                tx.prepare_cached("DELETE FROM trigger_firings WHERE id = ?1")?
                    .execute([&id])?;
                let callback_body = error_body(&chat_id, LEASE_EXPIRED);
                let mail = failure_mail(&trigger, &flow_name, now, &input, LEASE_EXPIRED);
                let result = trig::failed_result(
                    &trigger,
                    now,
                    is_cron.then(|| from_millis(scheduled)),
                    input,
                    chat_id,
                    LEASE_EXPIRED.to_owned(),
                );
                let stored = insert_result(&tx, result, keep)?;
                if let Some(mail) = mail {
                    insert_mail(&tx, trigger.id, &mail, now)?;
                }
                fill_callback(&tx, &id, stored.id, &callback_body)?;
            }
            tx.commit()?;
            Ok(count)
        })
        .await
    }

    async fn list_trigger_results(
        &self,
        trigger: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {RESULT_COLUMNS} FROM trigger_results WHERE trigger_id = ?1
                 ORDER BY seq DESC LIMIT ?2"
            ))?
            .query_map(
                params![trigger.to_string(), i64::from(limit)],
                result_from_row,
            )?
            .collect()
        })
        .await
    }

    async fn delete_trigger_results(&self, trigger: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let mut deleted = 0;
            {
                let mut stmt = tx.prepare_cached(
                    "DELETE FROM trigger_results WHERE trigger_id = ?1 AND id = ?2",
                )?;
                for id in &ids {
                    deleted += stmt.execute(params![trigger.to_string(), id])? as u64;
                }
            }
            tx.commit()?;
            Ok(deleted)
        })
        .await
    }

    async fn recent_trigger_results(
        &self,
        triggers: &[Uuid],
        per_trigger: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        if triggers.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = triggers.iter().map(Uuid::to_string).collect();
        self.read(move |conn| {
            let sql = format!(
                "SELECT {RESULT_COLUMNS} FROM (
                   SELECT *, ROW_NUMBER() OVER (PARTITION BY trigger_id ORDER BY seq DESC) AS n
                   FROM trigger_results WHERE trigger_id IN ({})
                 ) WHERE n <= {per_trigger} ORDER BY trigger_id, seq DESC",
                placeholders(ids.len())
            );
            let mut stmt = conn.prepare(&sql)?;
            stmt.query_map(rusqlite::params_from_iter(ids), result_from_row)?
                .collect()
        })
        .await
    }

    async fn prune_trigger_history(
        &self,
        before: Timestamp,
        deliveries_before: Timestamp,
    ) -> StoreResult<u64> {
        self.call(move |conn| {
            let results = conn.execute(
                "DELETE FROM trigger_results WHERE executed_at < ?1",
                [to_millis(&before)],
            )?;
            let deliveries = conn.execute(
                "DELETE FROM webhook_deliveries WHERE created_at < ?1",
                [to_millis(&deliveries_before)],
            )?;
            let mails = conn.execute(
                "DELETE FROM mail_outbox WHERE sent_at IS NOT NULL AND sent_at < ?1",
                [to_millis(&deliveries_before)],
            )?;
            let callbacks = conn.execute(
                "DELETE FROM callback_outbox WHERE created_at < ?1
                   AND (delivered_at IS NOT NULL OR failed_at IS NOT NULL)",
                [to_millis(&deliveries_before)],
            )?;
            Ok((results + deliveries + mails + callbacks) as u64)
        })
        .await
    }

    async fn begin_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        now: Timestamp,
    ) -> StoreResult<Delivery> {
        let delivery = delivery.to_owned();
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let inserted = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO webhook_deliveries (trigger_id, delivery_id, created_at)
                     VALUES (?1, ?2, ?3)",
                )?
                .execute(params![trigger.to_string(), delivery, to_millis(&now)])?;
            let state = if inserted == 1 {
                Delivery::New
            } else {
                let (status, body): (Option<i64>, Option<String>) = tx.query_row(
                    "SELECT status, body FROM webhook_deliveries WHERE trigger_id = ?1 AND delivery_id = ?2",
                    params![trigger.to_string(), delivery],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                match (status, body) {
                    (Some(status), Some(body)) => Delivery::Answered {
                        status: u16::try_from(status).unwrap_or(200),
                        body,
                    },
                    _ => Delivery::InProgress,
                }
            };
            tx.commit()?;
            Ok(state)
        })
        .await
    }

    async fn finish_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        let (delivery, body) = (delivery.to_owned(), body.to_owned());
        self.call(move |conn| {
            conn.execute(
                "UPDATE webhook_deliveries SET status = ?3, body = ?4
                 WHERE trigger_id = ?1 AND delivery_id = ?2",
                params![trigger.to_string(), delivery, i64::from(status), body],
            )?;
            Ok(())
        })
        .await
    }

    async fn claim_mail(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
    ) -> StoreResult<Vec<(OutboxMail, Option<Timestamp>)>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let due: Vec<(OutboxMail, Option<Timestamp>)> = tx
                .prepare_cached(
                    "SELECT m.id, m.trigger_id, m.recipient, m.subject, m.body, m.attempts,
                       m.created_at,
                       (SELECT MAX(s.sent_at) FROM mail_outbox s WHERE s.trigger_id = m.trigger_id)
                     FROM mail_outbox m WHERE m.sent_at IS NULL AND m.next_attempt_at <= ?1
                     ORDER BY m.created_at LIMIT 500",
                )?
                .query_map([to_millis(&now)], |r| {
                    Ok((
                        OutboxMail {
                            id: uuid_at(r, 0)?,
                            trigger_id: uuid_at(r, 1)?,
                            recipient: r.get(2)?,
                            subject: r.get(3)?,
                            body: r.get(4)?,
                            attempts: r.get(5)?,
                            created_at: from_millis(r.get(6)?),
                        },
                        r.get::<_, Option<i64>>(7)?.map(from_millis),
                    ))
                })?
                .collect::<rusqlite::Result<_>>()?;
            for (mail, _) in &due {
                tx.prepare_cached("UPDATE mail_outbox SET next_attempt_at = ?2 WHERE id = ?1")?
                    .execute(params![mail.id.to_string(), to_millis(&claim_until)])?;
            }
            tx.commit()?;
            Ok(due)
        })
        .await
    }

    async fn mail_sent(&self, ids: &[Uuid], at: Timestamp) -> StoreResult<()> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            for id in ids {
                tx.prepare_cached("UPDATE mail_outbox SET sent_at = ?2 WHERE id = ?1")?
                    .execute(params![id, to_millis(&at)])?;
            }
            tx.commit()
        })
        .await
    }

    async fn mail_retry(&self, ids: &[Uuid], at: Timestamp, failed: bool) -> StoreResult<()> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            for id in ids {
                tx.prepare_cached(
                    "UPDATE mail_outbox SET next_attempt_at = ?2, attempts = attempts + ?3 WHERE id = ?1",
                )?
                .execute(params![id, to_millis(&at), i64::from(failed)])?;
            }
            tx.commit()
        })
        .await
    }

    async fn any_trigger_with_email(&self) -> StoreResult<bool> {
        self.read(|conn| {
            conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM triggers WHERE notification_email IS NOT NULL)",
                [],
                |r| r.get(0),
            )
        })
        .await
    }
    async fn claim_callbacks(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<OutboxCallback>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let due: Vec<OutboxCallback> = tx
                .prepare_cached(
                    "UPDATE callback_outbox SET next_attempt_at = ?2
                     WHERE id IN (SELECT id FROM callback_outbox
                                  WHERE body IS NOT NULL AND delivered_at IS NULL
                                    AND failed_at IS NULL AND next_attempt_at <= ?1
                                  ORDER BY next_attempt_at LIMIT ?3)
                     RETURNING id, trigger_id, url, secret, body, attempts",
                )?
                .query_map(
                    params![to_millis(&now), to_millis(&claim_until), i64::from(limit)],
                    |r| {
                        Ok(OutboxCallback {
                            id: uuid_at(r, 0)?,
                            trigger_id: uuid_at(r, 1)?,
                            url: r.get(2)?,
                            secret: r.get(3)?,
                            body: r.get(4)?,
                            attempts: r.get(5)?,
                        })
                    },
                )?
                .collect::<rusqlite::Result<_>>()?;
            tx.commit()?;
            Ok(due)
        })
        .await
    }

    async fn settle_callbacks(&self, attempts: &[CallbackAttempt]) -> StoreResult<()> {
        let attempts = attempts.to_vec();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            for attempt in attempts {
                let id = attempt.id.to_string();
                let at = to_millis(&attempt.at);
                match attempt.outcome {
                    AttemptOutcome::Delivered => tx
                        .prepare_cached(
                            "UPDATE callback_outbox SET delivered_at = ?2, attempts = attempts + 1,
                               last_error = NULL WHERE id = ?1",
                        )?
                        .execute(params![id, at])?,
                    AttemptOutcome::Retry { at: next, error } => tx
                        .prepare_cached(
                            "UPDATE callback_outbox SET next_attempt_at = ?2,
                               attempts = attempts + 1, last_error = ?3 WHERE id = ?1",
                        )?
                        .execute(params![id, to_millis(&next), error])?,
                    AttemptOutcome::GaveUp { error } => tx
                        .prepare_cached(
                            "UPDATE callback_outbox SET failed_at = ?2, attempts = attempts + 1,
                               last_error = ?3 WHERE id = ?1",
                        )?
                        .execute(params![id, at, error])?,
                };
            }
            tx.commit()
        })
        .await
    }

    async fn callbacks_of_results(&self, results: &[Uuid]) -> StoreResult<Vec<CallbackState>> {
        if results.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = results.iter().map(Uuid::to_string).collect();
        self.read(move |conn| {
            let sql = format!(
                "SELECT id, result_id, url, delivered_at, failed_at, attempts, last_error
                 FROM callback_outbox WHERE result_id IN ({})",
                placeholders(ids.len())
            );
            let mut stmt = conn.prepare(&sql)?;
            stmt.query_map(rusqlite::params_from_iter(ids), |r| {
                let delivered_at = r.get::<_, Option<i64>>(3)?.map(from_millis);
                let failed_at = r.get::<_, Option<i64>>(4)?.map(from_millis);
                Ok(CallbackState {
                    id: uuid_at(r, 0)?,
                    result_id: uuid_at(r, 1)?,
                    url: r.get(2)?,
                    status: CallbackStatus::of(delivered_at, failed_at),
                    attempts: r.get(5)?,
                    last_error: r.get(6)?,
                    delivered_at,
                })
            })?
            .collect()
        })
        .await
    }
}

/// One webhook call's claim (see [`TriggerStore::claim_webhook_firing`]).
fn claim_webhook_firing(conn: &Connection, claim: FiringClaim) -> StoreResult<Option<Firing>> {
    let FiringClaim {
        trigger,
        now,
        owner,
        lease_until,
        call,
    } = claim;
    let claimed = conn
        .prepare_cached(&format!(
            "UPDATE triggers SET execution_count = execution_count + 1, last_executed = ?2,
               enabled = CASE WHEN max_executions IS NOT NULL
                               AND execution_count + 1 >= max_executions
                         THEN 0 ELSE enabled END
             WHERE id = ?1 AND enabled = 1
               AND (max_executions IS NULL OR execution_count < max_executions)
             RETURNING {TRIGGER_COLUMNS}"
        ))
        .and_then(|mut statement| {
            statement
                .query_row(
                    params![trigger.to_string(), to_millis(&now)],
                    trigger_from_row,
                )
                .optional()
        })
        .map_err(backend)?;
    let Some(trigger) = claimed else {
        return Ok(None);
    };
    let firing = Firing {
        id: Uuid::new_v4(),
        trigger,
        scheduled_at: now,
        is_cron: false,
        leased: true,
    };
    insert_firing(
        conn,
        &firing,
        owner,
        lease_until,
        &call.input,
        &call.chat_id,
    )
    .map_err(backend)?;
    if let Some(callback) = &call.callback {
        insert_callback(conn, &firing, callback, now).map_err(backend)?;
    }
    Ok(Some(firing))
}

/// One firing's end (see [`TriggerStore::finish_firing`]), its trigger's
/// results not yet trimmed.
pub(super) fn finish_firing(
    conn: &Connection,
    end: FiringEnd,
) -> StoreResult<Option<TriggerResult>> {
    let write = || -> rusqlite::Result<Option<TriggerResult>> {
        let found = match end.leased {
            true => conn
                .prepare_cached("DELETE FROM trigger_firings WHERE id = ?1")?
                .execute([end.firing.to_string()])?,
            false => conn
                .prepare_cached(
                    "UPDATE triggers SET execution_count = execution_count + 1,
                       last_executed = MAX(COALESCE(last_executed, 0), ?2)
                     WHERE id = ?1",
                )?
                .execute(params![
                    end.result.trigger_id.to_string(),
                    to_millis(&end.result.executed_at)
                ])?,
        };
        if found == 0 {
            // Deleted with its trigger, or (leased) expired and recorded by
            // another replica.
            return Ok(None);
        }
        let trigger = end.result.trigger_id;
        let at = end.result.executed_at;
        let stored = insert_result_row(conn, end.result)?;
        if let Some(mail) = end.mail {
            insert_mail(conn, trigger, &mail, at)?;
        }
        if let Some(body) = end.callback_body {
            fill_callback(conn, &end.firing.to_string(), stored.id, &body)?;
        }
        Ok(Some(stored))
    };
    write().map_err(backend)
}
