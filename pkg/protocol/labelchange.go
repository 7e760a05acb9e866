package protocol

import "maps"

// LabelChange is the body of POST /v1/agents/{id}:label: the labels an
// operator sets on an agent and the keys it removes. The controller's
// copy of an agent's labels is authoritative (see AgentInfo.LabelsFrom);
// this is how it changes after enrollment.
type LabelChange struct {
	// Set adds or replaces these labels.
	Set map[string]string `json:"set,omitempty"`
	// Remove deletes these keys (a key not present is no error).
	Remove []string `json:"remove,omitempty"`
}

// Validate checks the change: at least one label, valid keys and values,
// no key both set and removed or removed twice.
func (c LabelChange) Validate() error {
	if len(c.Set) == 0 && len(c.Remove) == 0 {
		return invalid("set", "is required: give at least one label to set (k=v) or remove (k-)")
	}
	if err := ValidateLabels("set", c.Set); err != nil {
		return err
	}
	if len(c.Remove) > MaxLabels {
		return invalid("remove", "has %d keys, at most %d allowed", len(c.Remove), MaxLabels)
	}
	seen := make(map[string]bool, len(c.Remove))
	for i, k := range c.Remove {
		f := "remove[" + itoa(i) + "]"
		if err := validateLabelKey(f, k); err != nil {
			return err
		}
		if seen[k] {
			return invalid(f, "key %q is removed twice", k)
		}
		seen[k] = true
		if _, ok := c.Set[k]; ok {
			return invalid(f, "key %q is both set and removed", k)
		}
	}
	return nil
}

// Apply returns labels with the change applied (labels is not modified).
// The result is nil when no label is left.
func (c LabelChange) Apply(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, c.Set)
	for _, k := range c.Remove {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// DecodeLabelChange decodes and validates a label change.
func DecodeLabelChange(data []byte) (LabelChange, error) {
	var c LabelChange
	if len(data) > MaxMessageSize {
		return c, fieldErrf(ErrTooLarge, "", "body is %d bytes, at most %d allowed", len(data), MaxMessageSize)
	}
	if err := strictUnmarshal(data, &c); err != nil {
		return LabelChange{}, err
	}
	if err := c.Validate(); err != nil {
		return LabelChange{}, err
	}
	return c, nil
}
