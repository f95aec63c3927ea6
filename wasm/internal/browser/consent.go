//go:build js

package browser

import (
	"encoding/hex"
	"errors"
	"fmt"
	"syscall/js"

	"github.com/blanket-fl/blanket/shared/task"
)

// errNoConsent: start without the volunteer's agreement to the study's
// consent text (the page's checkbox), or before the page gave the
// study's definition (setTask), whose consent text the page shows.
var errNoConsent = errors.New("blanket: agree to the consent text first (tick the box)")

// consentInfo is what setTask adds to its result for the page: the
// consent hash of the definition (task.ConsentHash, hex) that start's
// consent option must repeat, and its short version shown beside the
// checkbox ("consent version 3f9a1b2c").
func consentInfo(t *task.Task, out map[string]any) {
	h := task.ConsentHash(t)
	out["consentHash"] = hex.EncodeToString(h[:])
	out["consentVersion"] = task.ConsentVersion(h)
}

// agreedConsent reads start's consent option, the hex consent hash the
// page passes only once the volunteer ticked the box beside the consent
// text, and checks it against the hash this module computes from the text
// it holds (the definition the page gave with setTask, the text the page
// shows): the hash the client seals its leader shares under
// (client.Config.Consent). It refuses a start without it, before setTask,
// or with another text's hash (the page and the module disagree on the
// text: a new class brought another task).
func (a *app) agreedConsent(opts js.Value) ([32]byte, error) {
	var given string
	if opts.Type() == js.TypeObject {
		if v := opts.Get("consent"); v.Type() == js.TypeString {
			given = v.String()
		}
	}
	if given == "" {
		return [32]byte{}, errNoConsent
	}
	a.task.mu.Lock()
	def := a.task.def
	a.task.mu.Unlock()
	if def == nil {
		return [32]byte{}, fmt.Errorf("%w: the page has not given the study's definition (setTask)", errNoConsent)
	}
	h := task.ConsentHash(def)
	if given != hex.EncodeToString(h[:]) {
		return [32]byte{}, fmt.Errorf("blanket: the consent text agreed to is not the study's (consent version %s): reload the page", task.ConsentVersion(h))
	}
	return h, nil
}
