-- A chatflow published as an MCP tool: Flowise's `mcpServerConfig`, kept as JSON
-- text beside the flow (enabled, tool name, description, the endpoint token's
-- hash and its sealed value), read with it and gone with it.
ALTER TABLE chatflows ADD COLUMN mcp_server_config TEXT;
