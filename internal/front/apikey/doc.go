// Package apikey is the API keys of the front doors: the HTTP API
// (httpapi), the MCP server on /mcp (mcpfront) and the metrics behind
// them all read the same keys.
//
// A key names a tenant and says what the tenant may do: the tools it may
// call and list (Key.Allows), whether it may read the metrics, its weight
// in fair shares and the priorities of its calls. Keys come from a YAML or
// JSON file and the environment variable Env (Parse, Load) and are looked
// up by the SHA-256 of the bearer token (Set.Lookup): the set holds no
// secret, and a lookup takes the same time whatever prefix of a key a
// guess shares.
//
//	keys:
//	  - tenant: team-a
//	    name: ci-bot              # the key's own name, for budgets on one key
//	    key: "…"                  # at least MinBytes; or sha256: "…"
//	    tools: [echo, read_file]  # absent: every tool
//	    weight: 3                 # the tenant's weight in fair shares
//	    priority: low             # its calls' priority
//	    max_priority: normal      # the highest a request may ask for
//
// A front door that authenticated a request puts its key in the request's
// context (NewContext); what runs the request reads it back (FromContext).
package apikey
