package orchhost

import (
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// newGate puts the policy gate in front of the dispatcher: every front
// door, and the durable tasks, dispatch through it.
func (h *Host) newGate(catalog dispatch.Catalog) (err error) {
	h.gate, err = policy.New(policy.Config{Next: h.d, Catalog: catalog, Logger: h.cfg.Logger})
	return err
}
