package builtin

import "encoding/json"

// Input schemas of the built-in tools defined here; read_file, write_file and
// search_web use tools.ReadFileSchema, tools.WriteFileSchema and
// tools.SearchWebSchema.

// ListDirSchema is the input schema of list_dir: an optional path, default
// "." (the workspace root).
var ListDirSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"path": {
			"type": "string",
			"default": ".",
			"description": "Directory to list, relative to the workspace root. \".\" is the root."
		}
	},
	"additionalProperties": false
}`)

// HTTPRequestSchema is the input schema of http_request: an http or https
// url, method (default GET), headers as an object of strings, and an
// optional body.
var HTTPRequestSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"method": {
			"type": "string",
			"enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
			"default": "GET",
			"description": "HTTP method."
		},
		"url": {
			"type": "string",
			"minLength": 1,
			"pattern": "\\S",
			"description": "Absolute http:// or https:// URL to request."
		},
		"headers": {
			"type": "object",
			"additionalProperties": {"type": "string"},
			"description": "Request headers, such as {\"Accept\": \"application/json\"}."
		},
		"body": {
			"type": "string",
			"description": "Request body, for POST, PUT and PATCH."
		}
	},
	"required": ["url"],
	"additionalProperties": false
}`)
