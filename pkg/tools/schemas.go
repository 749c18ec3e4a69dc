package tools

import "encoding/json"

// Input schemas of the built-in tools, from the seed's pydantic models
// (SearchInput, ReadFileInput, WriteFileInput). "Not empty after trimming" is
// written as "pattern": "\\S" (at least one non-whitespace character) next to
// "minLength": 1; the validator reports such a value as "must not be empty or
// only whitespace". Unknown properties are refused, so a misspelt optional
// argument ("maxResults") is reported instead of silently replaced by its
// default.

// SearchWebSchema is the input schema of search_web: a non-blank query,
// max_results 1..50 (default 10), language (default "ru").
var SearchWebSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"query": {
			"type": "string",
			"minLength": 1,
			"pattern": "\\S",
			"description": "What to search for. Must not be empty or only whitespace."
		},
		"max_results": {
			"type": "integer",
			"minimum": 1,
			"maximum": 50,
			"default": 10,
			"description": "How many results to return, from 1 to 50."
		},
		"language": {
			"type": "string",
			"default": "ru",
			"description": "Language code of the results, such as \"ru\" or \"en\"."
		}
	},
	"required": ["query"],
	"additionalProperties": false
}`)

// ReadFileSchema is the input schema of read_file: a non-blank path,
// encoding (default "utf-8").
var ReadFileSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"path": {
			"type": "string",
			"minLength": 1,
			"pattern": "\\S",
			"description": "Path of the file to read, relative to the workspace."
		},
		"encoding": {
			"type": "string",
			"default": "utf-8",
			"description": "Text encoding of the file."
		}
	},
	"required": ["path"],
	"additionalProperties": false
}`)

// WriteFileSchema is the input schema of write_file: a non-blank path, the
// content, mode "write" or "append" (default "write").
var WriteFileSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"path": {
			"type": "string",
			"minLength": 1,
			"pattern": "\\S",
			"description": "Path of the file to write, relative to the workspace."
		},
		"content": {
			"type": "string",
			"description": "Text to write. May be empty."
		},
		"mode": {
			"type": "string",
			"enum": ["write", "append"],
			"default": "write",
			"description": "\"write\" replaces the file, \"append\" adds to its end."
		}
	},
	"required": ["path", "content"],
	"additionalProperties": false
}`)
