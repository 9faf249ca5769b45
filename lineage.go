package rheo

import (
	"bytes"
	"encoding/json"
)

// The lineage keys of an event's metadata object.
const (
	// MetaCorrelationID names the key that groups every event of one
	// conversation or workflow.
	MetaCorrelationID = "correlation_id"
	// MetaCausationID names the key holding the id of the event that
	// caused this one.
	MetaCausationID = "causation_id"
	// MetaProducer names the key identifying the producing service.
	MetaProducer = "producer"
	// MetaSchema names the key holding the payload's schema name.
	MetaSchema = "schema"
	// MetaSchemaVersion names the key holding the payload schema's
	// version, a JSON integer.
	MetaSchemaVersion = "schema_version"
)

// Lineage is where an event comes from, as kept under the lineage keys of
// its metadata. A zero field means the key is absent.
type Lineage struct {
	// CorrelationID groups the events of one conversation or workflow.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID is the id of the event that caused this one.
	CausationID string `json:"causation_id,omitempty"`
	// Producer identifies the service that produced the event.
	Producer string `json:"producer,omitempty"`
	// Schema names the payload's schema.
	Schema string `json:"schema,omitempty"`
	// SchemaVersion is the version of the payload's schema.
	SchemaVersion int `json:"schema_version,omitempty"`
}

// Metadata returns the lineage as a metadata object holding its non-zero
// fields. Use it as AppendOptions.Metadata, or as Query.Metadata to find
// the events that share these fields (Lineage{CorrelationID: id}.Metadata()
// finds a whole conversation).
func (l Lineage) Metadata() json.RawMessage {
	// Marshal cannot fail for strings and an int.
	b, _ := json.Marshal(l)
	return b
}

// LineageOf reads the lineage keys of a metadata object. Absent keys (and
// JSON nulls) are zero fields; a key holding another JSON type than its
// field's, or metadata that is not an object, is invalid_argument.
func LineageOf(metadata json.RawMessage) (Lineage, error) {
	fields, err := metadataObject(metadata)
	if err != nil {
		return Lineage{}, err
	}
	var l Lineage
	for key, dst := range map[string]*string{
		MetaCorrelationID: &l.CorrelationID,
		MetaCausationID:   &l.CausationID,
		MetaProducer:      &l.Producer,
		MetaSchema:        &l.Schema,
	} {
		if raw, ok := fields[key]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return Lineage{}, Errorf(ErrInvalidArgument, "metadata %s must be a string, got %s", key, raw)
			}
		}
	}
	if raw, ok := fields[MetaSchemaVersion]; ok {
		if err := json.Unmarshal(raw, &l.SchemaVersion); err != nil {
			return Lineage{}, Errorf(ErrInvalidArgument, "metadata %s must be an integer, got %s", MetaSchemaVersion, raw)
		}
	}
	return l, nil
}

// WithLineage returns metadata with the lineage keys of l's non-zero
// fields set, replacing what they held; its other keys are kept. Nil or
// empty metadata counts as {}; metadata that is not a JSON object is
// invalid_argument.
func WithLineage(metadata json.RawMessage, l Lineage) (json.RawMessage, error) {
	fields, err := metadataObject(metadata)
	if err != nil {
		return nil, err
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(l.Metadata(), &set); err != nil {
		return nil, err
	}
	for key, value := range set {
		fields[key] = value
	}
	return json.Marshal(fields)
}

// CausedBy returns the metadata of an event caused by parent: metadata
// (nil counts as {}) with the parent's correlation id, or the parent's
// own id when it has none, and the parent's id as causation id. Its other
// keys, producer and schema included, are kept: they describe the new
// event, not the parent.
func CausedBy(parent Event, metadata json.RawMessage) (json.RawMessage, error) {
	if parent.ID == "" {
		return nil, Errorf(ErrInvalidArgument, "the parent event has no id")
	}
	parentLineage, err := LineageOf(parent.Metadata)
	if err != nil {
		return nil, err
	}
	correlation := parentLineage.CorrelationID
	if correlation == "" {
		correlation = parent.ID
	}
	return WithLineage(metadata, Lineage{CorrelationID: correlation, CausationID: parent.ID})
}

// metadataObject decodes a metadata object; nil or blank is {}.
func metadataObject(metadata json.RawMessage) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(metadata)
	if len(trimmed) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	var fields map[string]json.RawMessage
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &fields) != nil {
		return nil, Errorf(ErrInvalidArgument, "metadata must be a JSON object")
	}
	return fields, nil
}
