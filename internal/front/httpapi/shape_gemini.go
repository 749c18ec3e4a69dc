package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// FormatGemini: the request is a Gemini Content (role "model") or a
// whole GenerateContentResponse (its candidates[0].content), or the
// parts array; its functionCall parts run. The answer is a Content with
// role "user" holding one functionResponse part per call.
const FormatGemini Format = "gemini"

// GeminiContent is the answer to a Gemini request: {"role":"user",
// "parts":[{"functionResponse":…}, …]}, one part per functionCall part in
// the same order. Parts is [] when the content had no functionCall.
type GeminiContent struct {
	Role  string       `json:"role"` // "user"
	Parts []GeminiPart `json:"parts"`
}

// GeminiPart is one part of a GeminiContent answer.
type GeminiPart struct {
	FunctionResponse GeminiFunctionResponse `json:"functionResponse"`
}

// GeminiFunctionResponse answers one functionCall. ID is the call's id,
// absent when the call had none; Response holds "output" (the result's
// text) or, for an error, "error" (the text for the model), as Gemini's
// FunctionResponse convention reads them.
type GeminiFunctionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response GeminiResponse `json:"response"`
}

// GeminiResponse is a function response's payload: exactly one member is
// set.
type GeminiResponse struct {
	Output *string `json:"output,omitempty"`
	Error  *string `json:"error,omitempty"`
}

// GeminiTool is the element of the answer to GET /v1/tools?format=gemini
// (an array of one GeminiTool, none when there are no tools): a Gemini
// Tool for the "tools" of a GenerateContentConfig.
type GeminiTool struct {
	FunctionDeclarations []GeminiFunctionDeclaration `json:"functionDeclarations"`
}

// GeminiFunctionDeclaration describes a function to Gemini. The tool's
// input schema goes unchanged as ParametersJSONSchema (Gemini's
// parametersJsonSchema, full JSON Schema), not as the OpenAPI-subset
// "parameters".
type GeminiFunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

// geminiShape is the Gemini API: functionCall parts in, functionResponse
// parts out.
type geminiShape struct{}

// geminiPartKeys are the members of a Gemini Part (which has no "type").
var geminiPartKeys = []string{
	"functionCall", "functionResponse", "text", "thought", "thoughtSignature", "inlineData",
	"fileData", "executableCode", "codeExecutionResult", "videoMetadata",
}

func (geminiShape) format() Format { return FormatGemini }

func (geminiShape) expects() string {
	return `a Gemini Content {"role":"model","parts":[…functionCall parts…]}, a whole GenerateContentResponse or the parts array`
}

func (geminiShape) claimItem(it arrayItem, i int) (string, bool) {
	if !it.hasType && hasAny(it.fields, geminiPartKeys) {
		return fmt.Sprintf("Gemini parts (a part with %s at [%d])", firstOf(it.fields, geminiPartKeys), i), true
	}
	return "", false
}

func (geminiShape) claimObject(msg map[string]json.RawMessage) (string, claim) {
	switch {
	case msg["candidates"] != nil:
		return "a Gemini GenerateContentResponse (it has candidates)", mine
	case msg["parts"] != nil:
		return "a Gemini Content (it has parts)", mine
	}
	return "", notMine
}

// refuseObject: a single part is not the content to answer.
func (geminiShape) refuseObject(msg map[string]json.RawMessage) error {
	if hasAny(msg, geminiPartKeys) {
		return badf("the body looks like one Gemini part (it has %s); post the Content {\"role\":\"model\",\"parts\":[…]}, or the whole response", firstOf(msg, geminiPartKeys))
	}
	return nil
}

func (geminiShape) parseArray(items []json.RawMessage, maxCalls int) (*turn, error) {
	return parseParts(items, "", "", maxCalls)
}

// parseObject reads a Gemini Content {"role":"model","parts":[…]} or a
// whole GenerateContentResponse, whose candidates[0].content is read (a
// candidate without content, as a blocked one is, has nothing to run).
func (geminiShape) parseObject(msg map[string]json.RawMessage, _ bool, maxCalls int) (*turn, error) {
	field, content := "", msg
	var responseID string
	if raw, ok := msg["candidates"]; ok {
		var err error
		if content, err = firstCandidate(raw); err != nil {
			return nil, err
		}
		if content == nil {
			return &turn{shape: geminiShape{}}, nil // a candidate without content: nothing to run
		}
		field = "candidates[0].content"
		_ = decodeString(msg["responseId"], &responseID)
	}
	if role, ok := content["role"]; ok && !isNull(role) {
		var r string
		if decodeString(role, &r) != nil {
			return nil, badf("%s: must be a string, not a JSON %s", dot(field, "role"), kind(role))
		}
		if r != "model" {
			return nil, badf("%s: is %q; post the model's content that asked for the functions", dot(field, "role"), r)
		}
	}
	raw, ok := content["parts"]
	if !ok || isNull(raw) {
		return &turn{shape: geminiShape{}}, nil // no parts: nothing to run
	}
	parts, err := decodeArray(raw)
	if err != nil {
		return nil, badf("%s: must be an array of parts, not a JSON %s", dot(field, "parts"), kind(raw))
	}
	return parseParts(parts, dot(field, "parts"), responseID, maxCalls)
}

// firstCandidate is the content of a response's first candidate: nil,
// and no error, when it has none.
func firstCandidate(raw json.RawMessage) (map[string]json.RawMessage, error) {
	candidates, err := decodeArray(raw)
	if err != nil {
		return nil, badf("candidates: must be an array, not a JSON %s", kind(raw))
	}
	if len(candidates) == 0 {
		return nil, badf("candidates: is empty; the response has no candidate to run (its promptFeedback says why)")
	}
	cand, err := object(candidates[0], "candidates[0]", "a candidate object")
	if err != nil {
		return nil, err
	}
	if raw, ok := cand["content"]; !ok || isNull(raw) {
		return nil, nil
	}
	return object(cand["content"], "candidates[0].content", `a Content object {"role":"model","parts":[…]}`)
}

// parseParts reads Gemini parts: functionCall parts become calls, every
// other part (text, thought, …) is skipped. A call without an id is keyed
// by geminiKey; its answer has no id either.
func parseParts(parts []json.RawMessage, field, responseID string, maxCalls int) (*turn, error) {
	t := newTurn(geminiShape{}, min(len(parts), maxCalls))
	seen := map[string]string{}
	turnKey := ""
	for i, raw := range parts {
		at := index(field, i)
		part, err := object(raw, at, "a Gemini part object")
		if err != nil {
			return nil, err
		}
		rawCall, ok := part["functionCall"]
		if !ok || isNull(rawCall) {
			if err := foreignItem(geminiShape{}, part, partType(part), part["type"] != nil, i, at); err != nil {
				return nil, err
			}
			continue
		}
		at += ".functionCall"
		call, err := object(rawCall, at, `an object {"name":…,"args":{…}}`)
		if err != nil {
			return nil, err
		}
		name, err := toolName(call, at, "a functionCall needs the name of the function")
		if err != nil {
			return nil, err
		}
		given, err := functionCallID(call, at)
		if err != nil {
			return nil, err
		}
		key := given
		if key == "" {
			if turnKey == "" {
				turnKey = geminiTurnKey(parts, responseID)
			}
			key = geminiKey(turnKey, i)
		}
		if prev, dup := seen[key]; dup {
			return nil, badf("%s.id: %q is also the id of %s; every functionCall id must be unique", at, key, prev)
		}
		seen[key] = strings.TrimSuffix(at, ".functionCall")
		input, err := functionCallArgs(call, at)
		if err != nil {
			return nil, err
		}
		if len(t.calls) == maxCalls {
			return nil, errTooManyCalls(maxCalls)
		}
		t.add(envelope.ToolUseBlock{Type: "tool_use", ID: key, Name: name, Input: input}, nil, wireCall{id: given})
	}
	return t, nil
}

// functionCallID is the id a functionCall was given, "" when none.
func functionCallID(call map[string]json.RawMessage, at string) (string, error) {
	raw, ok := call["id"]
	if !ok || isNull(raw) {
		return "", nil
	}
	given, err := requiredString(call, at, "id", "an id, when given, is the one the model gave the call")
	if err != nil {
		return "", err
	}
	if problem := checkID(given); problem != "" {
		return "", badf("%s.id: %s", at, problem)
	}
	return given, nil
}

// functionCallArgs is a functionCall's input: its args object, {} when
// it has none.
func functionCallArgs(call map[string]json.RawMessage, at string) (json.RawMessage, error) {
	raw := bytes.TrimSpace(call["args"])
	if len(raw) == 0 || isNull(raw) {
		return json.RawMessage(`{}`), nil
	}
	if raw[0] != '{' {
		return nil, badf("%s.args: must be an object, not a JSON %s", at, kind(raw))
	}
	return raw, nil
}

// geminiTurnKey names a turn whose functionCalls have no ids: the
// response's responseId when the body was a whole response (each response
// has its own), else a hash of the parts (their JSON with keys sorted), so
// that the same content posted again (a retry) is the same calls, and
// another turn's content (other text, other thought signatures, other
// arguments) is other calls.
func geminiTurnKey(parts []json.RawMessage, responseID string) string {
	if responseID != "" && len(responseID) <= 128 && checkID(responseID) == "" {
		return responseID
	}
	h := sha256.New()
	for _, p := range parts {
		var v any
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			canon, _ := json.Marshal(v)
			h.Write(canon)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// geminiKey is the pool's id of the functionCall without an id at
// position i of the parts of a turn: "gemini:<turn>:<i>".
func geminiKey(turnKey string, i int) string { return "gemini:" + turnKey + ":" + strconv.Itoa(i) }

// answer is one functionResponse part per functionCall, with the call's
// id when it had one; a result's text goes under response.output, an
// error's under response.error.
func (geminiShape) answer(t *turn, results []envelope.Result) any {
	out := GeminiContent{Role: "user", Parts: make([]GeminiPart, len(results))}
	for i := range results {
		text := contentText(results[i].Content, "Gemini function responses")
		resp := GeminiResponse{Output: &text}
		if results[i].IsError {
			resp = GeminiResponse{Error: &text}
		}
		out.Parts[i] = GeminiPart{FunctionResponse: GeminiFunctionResponse{ID: t.wire[i].id, Name: t.calls[i].Name, Response: resp}}
	}
	return out
}

func (geminiShape) toolList(defs []tools.Definition) any {
	if len(defs) == 0 {
		return []GeminiTool{}
	}
	decls := make([]GeminiFunctionDeclaration, len(defs))
	for i, d := range defs {
		decls[i] = GeminiFunctionDeclaration{Name: d.Name, Description: d.Description, ParametersJSONSchema: d.InputSchema}
	}
	return []GeminiTool{{FunctionDeclarations: decls}}
}

// partType is a part's type member, which Gemini's parts do not have: ""
// unless the part is another model API's item.
func partType(part map[string]json.RawMessage) string {
	var typ string
	if raw, ok := part["type"]; ok {
		_ = decodeString(raw, &typ)
	}
	return typ
}
