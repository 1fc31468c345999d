package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store/pgstore"
	"github.com/idemstore/idemstore/store/seal"
)

// The environment variables that give the seal keys, as the services read
// them (docs/operations.md, "Encryption at rest").
const (
	envSealKeys    = "IDEMSTORE_SEAL_KEYS"
	envSealCurrent = "IDEMSTORE_SEAL_CURRENT"
)

// maxFailuresShown bounds the records that do not open a reseal prints:
// with a key missing, every record under it fails.
const maxFailuresShown = 20

// loadSealer makes the Sealer of the keys in -seal-keys-file (else
// $IDEMSTORE_SEAL_KEYS) with -seal-current (else $IDEMSTORE_SEAL_CURRENT)
// as the current key: nil when no keys are given, refused (a usage error)
// when needsKey and there is no current key. Its errors name where the
// keys came from and never repeat them.
func loadSealer(cfg config, needsKey bool) (*seal.Sealer, error) {
	text, from := os.Getenv(envSealKeys), "$"+envSealKeys
	if cfg.sealKeysFile != "" {
		b, err := readKeysFile(cfg.sealKeysFile)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, usagef("-seal-keys-file %s: %s", contract.Quote(cfg.sealKeysFile), err)
		}
		text, from = string(b), "-seal-keys-file"
	}
	current, currentFrom := cfg.sealCurrent, "-seal-current"
	if current == "" {
		current, currentFrom = os.Getenv(envSealCurrent), "$"+envSealCurrent
	}
	if text == "" {
		if needsKey {
			return nil, usagef("%s needs the seal keys: -seal-keys-file or $%s, and the current key's id: -seal-current or $%s",
				cfg.command, envSealKeys, envSealCurrent)
		}
		if current != "" {
			return nil, usagef("%s names key %s, and no keys are given (-seal-keys-file or $%s)", currentFrom, shownKeyID(current), envSealKeys)
		}
		return nil, nil
	}
	keys, err := seal.ParseKeys(text)
	if err != nil {
		var ie *contract.InputError
		if errors.As(err, &ie) {
			return nil, usagef("%s: %s", from, ie.Problem)
		}
		return nil, err
	}
	var id seal.KeyID
	if current != "" {
		if id, err = seal.ParseKeyID(current); err != nil {
			return nil, usagef("invalid %s %s: want a key id, 1 or more", currentFrom, shownKeyID(current))
		}
	}
	if needsKey && id == 0 {
		return nil, usagef("%s needs the current key's id: -seal-current or $%s", cfg.command, envSealCurrent)
	}
	sealer, err := seal.New(seal.Config{Current: id, Keys: keys})
	if err != nil {
		var ce *contract.ConfigError
		if errors.As(err, &ce) {
			return nil, usagef("the seal keys (%s, %s): %s: %s", from, currentFrom, ce.Field, ce.Problem)
		}
		return nil, err
	}
	return sealer, nil
}

// maxShownKeyID is the longest -seal-current an error repeats: a key id has
// at most 10 digits, and a longer value may be a key given as its id.
const maxShownKeyID = 12

// shownKeyID is -seal-current as an error shows it: quoted when short,
// else only its length, so that a key given as its id is never repeated.
func shownKeyID(current string) string {
	if len(current) > maxShownKeyID {
		return fmt.Sprintf("(%d bytes, not shown)", len(current))
	}
	return contract.Quote(current)
}

// maxKeysFileBytes bounds what -seal-keys-file reads: an entry is about 60
// bytes, so this holds thousands of keys, and a file named by mistake
// (a disk image, /dev/zero) is refused instead of read whole.
const maxKeysFileBytes = 1 << 20

// readKeysFile reads a key file of at most maxKeysFileBytes.
func readKeysFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeysFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeysFileBytes {
		return nil, fmt.Errorf("over %d bytes: not a key file", maxKeysFileBytes)
	}
	return b, nil
}

// resealJSON is what reseal prints with -json.
type resealJSON struct {
	DryRun      bool          `json:"dry_run"`
	KeyID       seal.KeyID    `json:"key_id"`
	Listed      int           `json:"listed"`
	Resealed    int           `json:"resealed"`
	Changed     int           `json:"changed"`
	Batches     int           `json:"batches"`
	FailedCount int           `json:"failed_count"`
	Failed      []failureJSON `json:"failed,omitempty"` // the first maxFailuresShown
}

type failureJSON struct {
	Scope string `json:"scope"`
	Key   string `json:"key"`
	Error string `json:"error"`
}

// errUnopened is reseal's failure when some results do not open: listed
// on stdout, and exit status 1.
type errUnopened struct{ n int }

func (e errUnopened) Error() string {
	return fmt.Sprintf("%d stored result(s) could not be opened and were left as they are (listed above): configure the key that sealed them, or delete their scopes", e.n)
}

// reseal moves every stored result in clear or under an old key to the
// current key, a batch at a time (pgstore.Store.Reseal), until a batch
// comes back short. Safe while the services run: a record that changes
// meanwhile is left alone and counted; run reseal again for it.
func reseal(ctx context.Context, e env) error {
	batch := int(e.cfg.batch)
	if batch == 0 {
		batch = pgstore.DefaultResealBatch
	}
	q := pgstore.ResealQuery{Limit: batch, DryRun: e.cfg.dryRun}
	out := resealJSON{DryRun: e.cfg.dryRun, KeyID: e.db.sealer.Current()}
	for {
		b, err := e.db.store.Reseal(ctx, q)
		if err != nil {
			if out.Resealed > 0 {
				fmt.Fprintf(e.stdout, "resealed %d records before the failure\n", out.Resealed)
			}
			return err
		}
		out.Batches++
		out.Listed += b.Listed
		out.Resealed += b.Resealed
		out.Changed += b.Changed
		out.FailedCount += len(b.Failed)
		for _, f := range b.Failed {
			if len(out.Failed) < maxFailuresShown {
				out.Failed = append(out.Failed, failureJSON{Scope: f.Scope, Key: f.Key.String(), Error: problemOf(f.Err)})
			}
		}
		if b.Done {
			break
		}
		q.After = b.Next
	}
	if err := printResealed(e, out); err != nil {
		return err
	}
	if out.FailedCount > 0 {
		return errUnopened{n: out.FailedCount}
	}
	return nil
}

func printResealed(e env, out resealJSON) error {
	if e.cfg.json {
		return writeJSON(e.stdout, out)
	}
	if out.DryRun {
		fmt.Fprintf(e.stdout, "dry run: %d records would be resealed under key %d (%d batch(es) read)\n", out.Resealed, out.KeyID, out.Batches)
	} else {
		fmt.Fprintf(e.stdout, "resealed %d records under key %d in %d batch(es)\n", out.Resealed, out.KeyID, out.Batches)
	}
	if out.Changed > 0 {
		fmt.Fprintf(e.stdout, "%d records changed meanwhile and were left as they are: run reseal again\n", out.Changed)
	}
	if out.FailedCount > 0 {
		fmt.Fprintf(e.stdout, "%d stored result(s) could not be opened:\n", out.FailedCount)
		for _, f := range out.Failed {
			fmt.Fprintf(e.stdout, "  scope %s key %s: %s\n", cell(f.Scope, 200), f.Key, line(f.Error))
		}
		if n := out.FailedCount - len(out.Failed); n > 0 {
			fmt.Fprintf(e.stdout, "  … and %d more\n", n)
		}
	}
	return nil
}

// problemOf is what is wrong with a result that does not open, without the
// scope and key its line already names.
func problemOf(err error) string {
	var oe *seal.OpenError
	if errors.As(err, &oe) {
		return oe.Problem
	}
	return oneLine(err)
}
