-- One lead per address and chat: the chat widget sends `leadEmail` with every
-- question after its lead form, which must not add a lead each time. Earlier
-- duplicates are folded into the first.
DELETE FROM leads WHERE email IS NOT NULL AND EXISTS (
    SELECT 1 FROM leads b
    WHERE b.chatflow_id = leads.chatflow_id AND b.chat_id = leads.chat_id
      AND b.email = leads.email
      AND (b.created_at < leads.created_at OR (b.created_at = leads.created_at AND b.id < leads.id))
);
CREATE UNIQUE INDEX leads_per_address ON leads (chatflow_id, chat_id, email) WHERE email IS NOT NULL;
