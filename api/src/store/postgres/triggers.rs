//! Triggers, their firings and results, webhook deliveries (replay protection) and the failure-mail outbox: PostgresStore's [`TriggerStore`].

use std::collections::BTreeMap;

use super::*;

#[async_trait]
impl TriggerStore for PostgresStore {
    async fn create_trigger(
        &self,
        trigger: Trigger,
        max_in_workspace: u64,
    ) -> StoreResult<Trigger> {
        let conflict = trig::address_taken(&trigger.node_id);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Replicas creating in one workspace at once take turns here, so the
        // count and the insert are one step.
        tx.execute(
            "SELECT pg_advisory_xact_lock(730197, hashtext($1::TEXT))",
            &[&trigger.workspace_id.to_string()],
        )
        .await
        .map_err(backend)?;
        let count: i64 = tx
            .query_one(
                "SELECT COUNT(*) FROM triggers WHERE workspace_id = $1",
                &[&trigger.workspace_id],
            )
            .await
            .map_err(backend)?
            .try_get(0)
            .map_err(backend)?;
        if u64::try_from(count).unwrap_or(0) >= max_in_workspace {
            return Err(StoreError::Conflict(trig::quota_reached(max_in_workspace)));
        }
        write_trigger(
            &tx,
            &format!(
                "INSERT INTO triggers ({TRIGGER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                   $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
                   $22, $23, $24, $25, $26)"
            ),
            &trigger,
        )
        .await
        .map_err(backend)
        .map_err(conflict_as(conflict))?;
        tx.commit().await.map_err(backend)?;
        Ok(trigger)
    }

    async fn get_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Trigger>> {
        self.query_opt(
            &format!("SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = $1 AND workspace_id = $2"),
            &[&id, &workspace],
            trigger_from_row,
        )
        .await
    }

    async fn owned_trigger(&self, workspace: Uuid, chatflow: Uuid) -> StoreResult<Option<Trigger>> {
        self.query_opt(
            &format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE chatflow_id = $1 AND workspace_id = $2 AND owned_by_chatflow"
            ),
            &[&chatflow, &workspace],
            trigger_from_row,
        )
        .await
    }

    async fn list_triggers(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Trigger>> {
        self.list_page(
            "SELECT COUNT(*) FROM triggers WHERE workspace_id = $1",
            &format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE workspace_id = $1
                 ORDER BY created_at DESC, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
            page,
            trigger_from_row,
        )
        .await
    }

    async fn update_trigger(&self, t: &Trigger) -> StoreResult<bool> {
        let conflict = trig::address_taken(&t.node_id);
        self.execute(
            "UPDATE triggers SET name = $3, chatflow_id = $4, node_id = $5, cron_expression = $6,
               timezone = $7, enabled = $8, webhook_platform = $9, webhook_secret = $10,
               webhook_bot_token = $11, trigger_message = $12, max_executions = $13,
               timeout_secs = $14, next_execution = $15, notification_email = $16,
               updated_at = $17, ends_at = $18, response_mode = $19, callback_url = $20,
               callback_secret = $21
             WHERE id = $1 AND workspace_id = $2",
            &[
                &t.id,
                &t.workspace_id,
                &t.name,
                &t.chatflow_id,
                &t.node_id,
                &t.cron_expression,
                &t.timezone,
                &t.enabled,
                &t.webhook_platform,
                &t.webhook_secret,
                &t.webhook_bot_token,
                &t.trigger_message,
                &t.max_executions,
                &t.timeout,
                &t.next_execution,
                &t.notification_email,
                &t.updated_date,
                &t.ends_at,
                &t.response_mode(),
                &t.callback_url,
                &t.callback_secret,
            ],
        )
        .await
        .map(|n| n > 0)
        .map_err(conflict_as(conflict))
    }

    async fn delete_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM triggers WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn find_webhook_triggers(&self, address: &str) -> StoreResult<Vec<Trigger>> {
        if let Ok(id) = Uuid::parse_str(address)
            && let Some(found) = self
                .query_opt(
                    &format!(
                        "SELECT {TRIGGER_COLUMNS} FROM triggers
                         WHERE id = $1 AND type = 'webhook' AND NOT owned_by_chatflow"
                    ),
                    &[&id],
                    trigger_from_row,
                )
                .await?
        {
            return Ok(vec![found]);
        }
        self.query_all(
            &format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE node_id = $1 AND type = 'webhook' AND NOT owned_by_chatflow
                 ORDER BY created_at, id LIMIT 2"
            ),
            &[&address],
            trigger_from_row,
        )
        .await
    }

    async fn triggers_with_secrets_not_sealed_by(
        &self,
        sealed_prefix: &str,
    ) -> StoreResult<Vec<Trigger>> {
        self.query_all(
            &format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE NOT starts_with(webhook_secret, $1)
                    OR NOT starts_with(webhook_bot_token, $1)
                    OR NOT starts_with(callback_secret, $1)"
            ),
            &[&sealed_prefix],
            trigger_from_row,
        )
        .await
    }

    async fn replace_trigger_secrets(&self, old: &Trigger, new: &Trigger) -> StoreResult<bool> {
        self.execute(
            "UPDATE triggers SET webhook_secret = $2, webhook_bot_token = $3, callback_secret = $4
             WHERE id = $1 AND webhook_secret IS NOT DISTINCT FROM $5
               AND webhook_bot_token IS NOT DISTINCT FROM $6
               AND callback_secret IS NOT DISTINCT FROM $7",
            &[
                &old.id,
                &new.webhook_secret,
                &new.webhook_bot_token,
                &new.callback_secret,
                &old.webhook_secret,
                &old.webhook_bot_token,
                &old.callback_secret,
            ],
        )
        .await
        .map(|n| n > 0)
    }

    async fn next_cron_due(&self) -> StoreResult<Option<Timestamp>> {
        self.query_opt(
            "SELECT MIN(next_execution) FROM triggers WHERE type = 'cron' AND enabled",
            &[],
            |r| r.try_get::<_, Option<Timestamp>>(0),
        )
        .await
        .map(Option::flatten)
    }

    async fn claim_due_triggers(
        &self,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        limit: u32,
        plan: ClaimPlanner,
    ) -> StoreResult<Vec<Firing>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Rows another replica is claiming are skipped, not waited for: each due
        // trigger is claimed by exactly one replica.
        let select = tx
            .prepare_cached(&format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE type = 'cron' AND enabled AND next_execution <= $1
                 ORDER BY next_execution LIMIT $2 FOR UPDATE SKIP LOCKED"
            ))
            .await
            .map_err(backend)?;
        let due = tx
            .query(&select, &[&now, &i64::from(limit)])
            .await
            .map_err(backend)?
            .iter()
            .map(trigger_from_row)
            .collect::<PgResult<Vec<_>>>()
            .map_err(backend)?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        // One statement per kind of write for the whole batch (arrays unnested),
        // not one round trip per trigger.
        let n = due.len();
        let (mut ids, mut counts, mut lasts, mut enabled, mut nexts) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut firing_ids, mut firing_triggers, mut firing_times, mut inputs, mut chats) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut missed = Vec::new();
        let mut firings = Vec::with_capacity(n);
        for mut trigger in due {
            let decision = plan(&trigger, now);
            if decision.missed > 0 {
                missed.push(trig::missed_result(&trigger, now, decision.missed));
            }
            trigger.advance(&decision, now);
            ids.push(trigger.id);
            counts.push(trigger.execution_count);
            lasts.push(trigger.last_executed);
            enabled.push(trigger.enabled);
            nexts.push(trigger.next_execution);
            if let Some(at) = decision.run_at {
                let firing = Firing {
                    id: Uuid::new_v4(),
                    scheduled_at: at,
                    is_cron: true,
                    leased: true,
                    trigger,
                };
                firing_ids.push(firing.id);
                firing_triggers.push(firing.trigger.id);
                firing_times.push(at);
                inputs.push(firing.trigger.cron_input());
                chats.push(firing.trigger.chat_id_at(at));
                firings.push(firing);
            }
        }
        for result in missed {
            insert_result(&tx, result, u32::MAX)
                .await
                .map_err(backend)?;
        }
        if !firings.is_empty() {
            let insert = tx
                .prepare_cached(
                    "INSERT INTO trigger_firings (id, trigger_id, scheduled_at, is_cron, owner,
                       lease_until, input, chat_id)
                     SELECT u.id, u.trigger_id, u.scheduled_at, TRUE, $4, $5, u.input, u.chat_id
                     FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $6::text[], $7::text[])
                       AS u(id, trigger_id, scheduled_at, input, chat_id)",
                )
                .await
                .map_err(backend)?;
            tx.execute(
                &insert,
                &[
                    &firing_ids,
                    &firing_triggers,
                    &firing_times,
                    &owner,
                    &lease_until,
                    &inputs,
                    &chats,
                ],
            )
            .await
            .map_err(backend)?;
        }
        let update = tx
            .prepare_cached(
                "UPDATE triggers t SET execution_count = u.execution_count,
                   last_executed = u.last_executed, enabled = u.enabled,
                   next_execution = u.next_execution
                 FROM unnest($1::uuid[], $2::bigint[], $3::timestamptz[], $4::bool[],
                             $5::timestamptz[])
                   AS u(id, execution_count, last_executed, enabled, next_execution)
                 WHERE t.id = u.id",
            )
            .await
            .map_err(backend)?;
        tx.execute(&update, &[&ids, &counts, &lasts, &enabled, &nexts])
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(firings)
    }

    async fn claim_webhook_firings(
        &self,
        claims: Vec<FiringClaim>,
    ) -> Vec<StoreResult<Option<Firing>>> {
        together_or_each(&claims, "webhook claims", |claims| {
            self.claim_together(claims)
        })
        .await
    }

    async fn firing_exists(&self, firing: Uuid) -> StoreResult<bool> {
        self.query_opt(
            "SELECT 1 FROM trigger_firings WHERE id = $1",
            &[&firing],
            |_| Ok(()),
        )
        .await
        .map(|found| found.is_some())
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
        self.execute(
            "UPDATE trigger_firings SET lease_until = $1 WHERE owner = $2 AND id = ANY($3)",
            &[&lease_until, &owner, &firings],
        )
        .await
        .map(drop)
    }

    async fn finish_firings(
        &self,
        ends: Vec<FiringEnd>,
    ) -> Vec<StoreResult<Option<TriggerResult>>> {
        together_or_each(&ends, "firing ends", |ends| self.finish_together(ends)).await
    }

    async fn expire_firings(&self, now: Timestamp, keep: u32) -> StoreResult<u64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let rows = tx
            .query(
                &format!(
                    "DELETE FROM trigger_firings f USING triggers t, chatflows c
                     WHERE t.id = f.trigger_id AND c.id = t.chatflow_id AND f.lease_until < $1
                     RETURNING f.scheduled_at, f.is_cron, f.input, f.chat_id, c.name, f.id,
                       {TRIGGER_COLUMNS_T}"
                ),
                &[&now],
            )
            .await
            .map_err(backend)?;
        let count = rows.len() as u64;
        for row in rows {
            let expired = (|| -> PgResult<_> {
                Ok((
                    row.try_get::<_, Timestamp>(0)?,
                    row.try_get::<_, bool>(1)?,
                    row.try_get::<_, String>(2)?,
                    row.try_get::<_, String>(3)?,
                    row.try_get::<_, String>(4)?,
                    row.try_get::<_, Uuid>(5)?,
                    trigger_at(&row, 6)?,
                ))
            })()
            .map_err(backend)?;
            let (scheduled, is_cron, input, chat_id, flow_name, firing, trigger) = expired;
            let callback_body = error_body(&chat_id, LEASE_EXPIRED);
            let mail = failure_mail(&trigger, &flow_name, now, &input, LEASE_EXPIRED);
            let result = trig::failed_result(
                &trigger,
                now,
                is_cron.then_some(scheduled),
                input,
                chat_id,
                LEASE_EXPIRED.to_owned(),
            );
            let stored = insert_result(&tx, result, keep).await.map_err(backend)?;
            if let Some(mail) = mail {
                insert_mail(&tx, trigger.id, &mail, now)
                    .await
                    .map_err(backend)?;
            }
            fill_callback(&tx, firing, stored.id, &callback_body)
                .await
                .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)?;
        Ok(count)
    }

    async fn list_trigger_results(
        &self,
        trigger: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        self.query_all(
            &format!(
                "SELECT {RESULT_COLUMNS} FROM trigger_results WHERE trigger_id = $1
                 ORDER BY seq DESC LIMIT $2"
            ),
            &[&trigger, &i64::from(limit)],
            result_from_row,
        )
        .await
    }

    async fn delete_trigger_results(&self, trigger: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        self.execute(
            "DELETE FROM trigger_results WHERE trigger_id = $1 AND id = ANY($2)",
            &[&trigger, &ids],
        )
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
        self.query_all(
            &format!(
                "SELECT {RESULT_COLUMNS} FROM (
                   SELECT *, ROW_NUMBER() OVER (PARTITION BY trigger_id ORDER BY seq DESC) AS n
                   FROM trigger_results WHERE trigger_id = ANY($1)
                 ) r WHERE n <= $2 ORDER BY trigger_id, seq DESC"
            ),
            &[&triggers, &i64::from(per_trigger)],
            result_from_row,
        )
        .await
    }

    async fn prune_trigger_history(
        &self,
        before: Timestamp,
        deliveries_before: Timestamp,
    ) -> StoreResult<u64> {
        let results = self
            .execute(
                "DELETE FROM trigger_results WHERE executed_at < $1",
                &[&before],
            )
            .await?;
        let deliveries = self
            .execute(
                "DELETE FROM webhook_deliveries WHERE created_at < $1",
                &[&deliveries_before],
            )
            .await?;
        let mails = self
            .execute(
                "DELETE FROM mail_outbox WHERE sent_at IS NOT NULL AND sent_at < $1",
                &[&deliveries_before],
            )
            .await?;
        let callbacks = self
            .execute(
                "DELETE FROM callback_outbox WHERE created_at < $1
                   AND (delivered_at IS NOT NULL OR failed_at IS NOT NULL)",
                &[&deliveries_before],
            )
            .await?;
        Ok(results + deliveries + mails + callbacks)
    }

    async fn begin_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        now: Timestamp,
    ) -> StoreResult<Delivery> {
        let inserted = self
            .execute(
                "INSERT INTO webhook_deliveries (trigger_id, delivery_id, created_at)
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                &[&trigger, &delivery, &now],
            )
            .await?;
        if inserted == 1 {
            return Ok(Delivery::New);
        }
        let seen = self
            .query_opt(
                "SELECT status, body FROM webhook_deliveries WHERE trigger_id = $1 AND delivery_id = $2",
                &[&trigger, &delivery],
                |r| Ok((r.try_get::<_, Option<i32>>(0)?, r.try_get::<_, Option<String>>(1)?)),
            )
            .await?;
        Ok(match seen {
            Some((Some(status), Some(body))) => Delivery::Answered {
                status: u16::try_from(status).unwrap_or(200),
                body,
            },
            Some(_) => Delivery::InProgress,
            // Pruned between the two statements: a new delivery after all.
            None => Delivery::New,
        })
    }

    async fn finish_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        self.execute(
            "UPDATE webhook_deliveries SET status = $3, body = $4
             WHERE trigger_id = $1 AND delivery_id = $2",
            &[&trigger, &delivery, &i32::from(status), &body],
        )
        .await
        .map(drop)
    }

    async fn claim_mail(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
    ) -> StoreResult<Vec<(OutboxMail, Option<Timestamp>)>> {
        self.query_all(
            "UPDATE mail_outbox m SET next_attempt_at = $2
             WHERE m.id IN (SELECT id FROM mail_outbox WHERE sent_at IS NULL AND next_attempt_at <= $1
                            ORDER BY created_at LIMIT 500 FOR UPDATE SKIP LOCKED)
             RETURNING m.id, m.trigger_id, m.recipient, m.subject, m.body, m.attempts, m.created_at,
               (SELECT MAX(s.sent_at) FROM mail_outbox s WHERE s.trigger_id = m.trigger_id)",
            &[&now, &claim_until],
            |r| {
                Ok((
                    OutboxMail {
                        id: r.try_get(0)?,
                        trigger_id: r.try_get(1)?,
                        recipient: r.try_get(2)?,
                        subject: r.try_get(3)?,
                        body: r.try_get(4)?,
                        attempts: r.try_get(5)?,
                        created_at: r.try_get(6)?,
                    },
                    r.try_get(7)?,
                ))
            },
        )
        .await
    }

    async fn mail_sent(&self, ids: &[Uuid], at: Timestamp) -> StoreResult<()> {
        self.execute(
            "UPDATE mail_outbox SET sent_at = $2 WHERE id = ANY($1)",
            &[&ids, &at],
        )
        .await
        .map(drop)
    }

    async fn mail_retry(&self, ids: &[Uuid], at: Timestamp, failed: bool) -> StoreResult<()> {
        self.execute(
            "UPDATE mail_outbox SET next_attempt_at = $2, attempts = attempts + $3 WHERE id = ANY($1)",
            &[&ids, &at, &i64::from(failed)],
        )
        .await
        .map(drop)
    }

    async fn any_trigger_with_email(&self) -> StoreResult<bool> {
        self.query_opt(
            "SELECT EXISTS (SELECT 1 FROM triggers WHERE notification_email IS NOT NULL)",
            &[],
            |r| r.try_get::<_, bool>(0),
        )
        .await
        .map(|found| found.unwrap_or(false))
    }

    async fn claim_callbacks(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<OutboxCallback>> {
        self.query_all(
            "UPDATE callback_outbox c SET next_attempt_at = $2
             WHERE c.id IN (SELECT id FROM callback_outbox
                            WHERE body IS NOT NULL AND delivered_at IS NULL AND failed_at IS NULL
                              AND next_attempt_at <= $1
                            ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED)
             RETURNING c.id, c.trigger_id, c.url, c.secret, c.body, c.attempts",
            &[&now, &claim_until, &i64::from(limit)],
            |r| {
                Ok(OutboxCallback {
                    id: r.try_get(0)?,
                    trigger_id: r.try_get(1)?,
                    url: r.try_get(2)?,
                    secret: r.try_get(3)?,
                    body: r.try_get(4)?,
                    attempts: r.try_get(5)?,
                })
            },
        )
        .await
    }

    async fn settle_callbacks(&self, attempts: &[CallbackAttempt]) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        for attempt in attempts {
            let n = match &attempt.outcome {
                AttemptOutcome::Delivered => {
                    tx.execute(
                        "UPDATE callback_outbox SET delivered_at = $2, attempts = attempts + 1,
                           last_error = NULL WHERE id = $1",
                        &[&attempt.id, &attempt.at],
                    )
                    .await
                }
                AttemptOutcome::Retry { at, error } => {
                    tx.execute(
                        "UPDATE callback_outbox SET next_attempt_at = $2,
                           attempts = attempts + 1, last_error = $3 WHERE id = $1",
                        &[&attempt.id, at, error],
                    )
                    .await
                }
                AttemptOutcome::GaveUp { error } => {
                    tx.execute(
                        "UPDATE callback_outbox SET failed_at = $2, attempts = attempts + 1,
                           last_error = $3 WHERE id = $1",
                        &[&attempt.id, &attempt.at, error],
                    )
                    .await
                }
            };
            n.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn callbacks_of_results(&self, results: &[Uuid]) -> StoreResult<Vec<CallbackState>> {
        if results.is_empty() {
            return Ok(Vec::new());
        }
        self.query_all(
            "SELECT id, result_id, url, delivered_at, failed_at, attempts, last_error
             FROM callback_outbox WHERE result_id = ANY($1)",
            &[&results],
            |r| {
                let delivered_at: Option<Timestamp> = r.try_get(3)?;
                let failed_at: Option<Timestamp> = r.try_get(4)?;
                Ok(CallbackState {
                    id: r.try_get(0)?,
                    result_id: r.try_get(1)?,
                    url: r.try_get(2)?,
                    status: CallbackStatus::of(delivered_at, failed_at),
                    attempts: r.try_get(5)?,
                    last_error: r.try_get(6)?,
                    delivered_at,
                })
            },
        )
        .await
    }
}

impl PostgresStore {
    /// Claims the calls' firings in one transaction: per trigger one counter
    /// update for all its calls (granting as many as `maxExecutions` leaves, to
    /// the first calls in order), then every firing and callback row in one
    /// statement each. So a trigger's row is locked once per batch, not once
    /// per call.
    async fn claim_together(&self, claims: &[FiringClaim]) -> StoreResult<Vec<Option<Firing>>> {
        // Calls grouped by trigger (each group in the calls' order), the
        // triggers' rows locked in id order: two replicas' batches naming the
        // same triggers never wait on each other crosswise.
        let mut by_trigger: BTreeMap<Uuid, Vec<usize>> = BTreeMap::new();
        for (at, claim) in claims.iter().enumerate() {
            by_trigger.entry(claim.trigger).or_default().push(at);
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let count = tx
            .prepare_cached(&format!(
                "UPDATE triggers t SET execution_count = t.execution_count + g.granted,
                   last_executed = $3,
                   enabled = CASE WHEN t.max_executions IS NOT NULL
                                   AND t.execution_count + g.granted >= t.max_executions
                             THEN FALSE ELSE t.enabled END
                 FROM (SELECT id, LEAST($2::bigint,
                               COALESCE(max_executions - execution_count, $2::bigint)) AS granted
                       FROM triggers WHERE id = $1 AND enabled
                         AND (max_executions IS NULL OR execution_count < max_executions)
                       FOR UPDATE) g
                 WHERE t.id = g.id
                 RETURNING {TRIGGER_COLUMNS_T}, g.granted"
            ))
            .await
            .map_err(backend)?;
        let mut claimed: Vec<Option<Firing>> = vec![None; claims.len()];
        for (trigger, calls) in &by_trigger {
            let asked = i64::try_from(calls.len()).unwrap_or(i64::MAX);
            let last = calls
                .iter()
                .map(|&at| claims[at].now)
                .max()
                .unwrap_or_else(time::now);
            let Some(row) = tx
                .query_opt(&count, &[trigger, &asked, &last])
                .await
                .map_err(backend)?
            else {
                continue;
            };
            let updated = trigger_from_row(&row).map_err(backend)?;
            let granted: i64 = row.try_get(row.len() - 1).map_err(backend)?;
            let granted = usize::try_from(granted).unwrap_or(0);
            for &at in calls.iter().take(granted) {
                claimed[at] = Some(Firing {
                    id: Uuid::new_v4(),
                    trigger: updated.clone(),
                    scheduled_at: claims[at].now,
                    is_cron: false,
                    leased: true,
                });
            }
        }
        let granted: Vec<(&FiringClaim, &Firing)> = claims
            .iter()
            .zip(&claimed)
            .filter_map(|(claim, firing)| firing.as_ref().map(|f| (claim, f)))
            .collect();
        if !granted.is_empty() {
            let column = |f: fn(&FiringClaim, &Firing) -> Uuid| -> Vec<Uuid> {
                granted.iter().map(|(c, fi)| f(c, fi)).collect()
            };
            let ids = column(|_, f| f.id);
            let triggers = column(|c, _| c.trigger);
            let owners = column(|c, _| c.owner);
            let at: Vec<Timestamp> = granted.iter().map(|(c, _)| c.now).collect();
            let leases: Vec<Timestamp> = granted.iter().map(|(c, _)| c.lease_until).collect();
            let inputs: Vec<&str> = granted.iter().map(|(c, _)| c.call.input.as_str()).collect();
            let chats: Vec<&str> = granted
                .iter()
                .map(|(c, _)| c.call.chat_id.as_str())
                .collect();
            tx.execute(
                "INSERT INTO trigger_firings (id, trigger_id, scheduled_at, is_cron, owner,
                   lease_until, input, chat_id)
                 SELECT id, trigger_id, scheduled_at, FALSE, owner, lease_until, input, chat_id
                 FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::uuid[],
                   $5::timestamptz[], $6::text[], $7::text[])
                   AS f(id, trigger_id, scheduled_at, owner, lease_until, input, chat_id)",
                &[&ids, &triggers, &at, &owners, &leases, &inputs, &chats],
            )
            .await
            .map_err(backend)?;
            let owed: Vec<_> = granted
                .iter()
                .filter_map(|(c, f)| c.call.callback.as_ref().map(|cb| (*c, *f, cb)))
                .collect();
            if !owed.is_empty() {
                let ids: Vec<Uuid> = owed.iter().map(|(_, _, cb)| cb.id).collect();
                let triggers: Vec<Uuid> = owed.iter().map(|(c, _, _)| c.trigger).collect();
                let firings: Vec<Uuid> = owed.iter().map(|(_, f, _)| f.id).collect();
                let urls: Vec<&str> = owed.iter().map(|(_, _, cb)| cb.url.as_str()).collect();
                let secrets: Vec<Option<&str>> =
                    owed.iter().map(|(_, _, cb)| cb.secret.as_deref()).collect();
                let at: Vec<Timestamp> = owed.iter().map(|(c, _, _)| c.now).collect();
                tx.execute(
                    "INSERT INTO callback_outbox (id, trigger_id, firing_id, url, secret,
                       attempts, next_attempt_at, created_at)
                     SELECT id, trigger_id, firing_id, url, secret, 0, at, at
                     FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[],
                       $6::timestamptz[]) AS c(id, trigger_id, firing_id, url, secret, at)",
                    &[&ids, &triggers, &firings, &urls, &secrets, &at],
                )
                .await
                .map_err(backend)?;
            }
        }
        tx.commit().await.map_err(backend)?;
        Ok(claimed)
    }

    /// Ends the firings in one transaction ([`end_firings`]).
    async fn finish_together(&self, ends: &[FiringEnd]) -> StoreResult<Vec<Option<TriggerResult>>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let ends: Vec<&FiringEnd> = ends.iter().collect();
        let finished = end_firings(&tx, &ends).await?;
        tx.commit().await.map_err(backend)?;
        Ok(finished)
    }
}

/// Ends `ends` inside the caller's transaction, as
/// [`TriggerStore::finish_firings`] does; one outcome per end, in order: the
/// leased ones' rows deleted in one statement, the unleased ones counted with
/// one update per trigger (an end whose row or trigger is gone stores
/// nothing), the results of the others inserted, their mail and callback
/// bodies written, then each trigger's results trimmed once.
pub(super) async fn end_firings(
    tx: &impl GenericClient,
    ends: &[&FiringEnd],
) -> StoreResult<Vec<Option<TriggerResult>>> {
    let ids: Vec<Uuid> = ends.iter().filter(|e| e.leased).map(|e| e.firing).collect();
    let removed: std::collections::HashSet<Uuid> = match ids.is_empty() {
        true => Default::default(),
        false => tx
            .query(
                "DELETE FROM trigger_firings WHERE id = ANY($1) RETURNING id",
                &[&ids],
            )
            .await
            .map_err(backend)?
            .iter()
            .map(|row| row.try_get(0))
            .collect::<PgResult<_>>()
            .map_err(backend)?,
    };
    // Unleased executions are counted now: per trigger one update for all,
    // the rows locked in id order (as claims lock them).
    let mut counted: BTreeMap<Uuid, (i64, Timestamp)> = BTreeMap::new();
    for end in ends.iter().filter(|e| !e.leased) {
        let at = end.result.executed_at;
        let (n, last) = counted.entry(end.result.trigger_id).or_insert((0, at));
        *n += 1;
        *last = (*last).max(at);
    }
    let mut present: std::collections::HashSet<Uuid> = Default::default();
    for (trigger, (n, last)) in &counted {
        let found = tx
            .execute(
                "UPDATE triggers SET execution_count = execution_count + $2,
                   last_executed = GREATEST(last_executed, $3)
                 WHERE id = $1",
                &[trigger, n, last],
            )
            .await
            .map_err(backend)?;
        if found > 0 {
            present.insert(*trigger);
        }
    }
    // Each trigger's results are trimmed once, after the batch's are in.
    let keep: BTreeMap<Uuid, u32> = ends
        .iter()
        .map(|end| (end.result.trigger_id, end.keep))
        .collect();
    let mut finished = Vec::with_capacity(ends.len());
    for end in ends {
        let found = match end.leased {
            true => removed.contains(&end.firing),
            false => present.contains(&end.result.trigger_id),
        };
        if !found {
            // Deleted with its trigger, or (leased) expired and recorded by
            // another replica.
            finished.push(None);
            continue;
        }
        finished.push(Some(end.result.clone().into_result(Uuid::new_v4())));
    }
    let stored: Vec<&TriggerResult> = finished.iter().flatten().collect();
    if !stored.is_empty() {
        let column = |f: fn(&TriggerResult) -> Option<String>| -> Vec<Option<String>> {
            stored.iter().map(|r| f(r)).collect()
        };
        let ids: Vec<Uuid> = stored.iter().map(|r| r.id).collect();
        let triggers: Vec<Uuid> = stored.iter().map(|r| r.trigger_id).collect();
        let executed: Vec<Timestamp> = stored.iter().map(|r| r.executed_at).collect();
        let scheduled: Vec<Option<Timestamp>> = stored.iter().map(|r| r.scheduled_at).collect();
        let inputs: Vec<&str> = stored.iter().map(|r| r.input.as_str()).collect();
        let outputs = column(|r| r.output.clone());
        let documents = column(|r| r.source_documents.as_ref().map(|v| v.to_string()));
        let tools = column(|r| r.used_tools.as_ref().map(|v| v.to_string()));
        let chats = column(|r| r.chat_id.clone());
        let statuses: Vec<&str> = stored.iter().map(|r| r.status.as_str()).collect();
        let errors = column(|r| r.error.clone());
        let missed: Vec<Option<i64>> = stored.iter().map(|r| r.missed_count).collect();
        tx.execute(
            &format!(
                "INSERT INTO trigger_results ({RESULT_COLUMNS})
                 SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[],
                   $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[],
                   $9::text[], $10::text[], $11::text[], $12::bigint[])"
            ),
            &[
                &ids, &triggers, &executed, &scheduled, &inputs, &outputs, &documents, &tools,
                &chats, &statuses, &errors, &missed,
            ],
        )
        .await
        .map_err(backend)?;
    }
    let mut bodies: (Vec<Uuid>, Vec<Uuid>, Vec<&str>) = Default::default();
    for (end, result) in ends.iter().zip(&finished) {
        let Some(result) = result else { continue };
        if let Some(mail) = &end.mail {
            insert_mail(tx, result.trigger_id, mail, result.executed_at)
                .await
                .map_err(backend)?;
        }
        if let Some(body) = &end.callback_body {
            bodies.0.push(end.firing);
            bodies.1.push(result.id);
            bodies.2.push(body);
        }
    }
    if !bodies.0.is_empty() {
        tx.execute(
            "UPDATE callback_outbox c SET body = u.body, result_id = u.result_id
             FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS u(firing_id, result_id, body)
             WHERE c.firing_id = u.firing_id AND c.body IS NULL",
            &[&bodies.0, &bodies.1, &bodies.2],
        )
        .await
        .map_err(backend)?;
    }
    for (trigger, kept) in keep {
        trim_results(tx, trigger, kept).await.map_err(backend)?;
    }
    Ok(finished)
}
