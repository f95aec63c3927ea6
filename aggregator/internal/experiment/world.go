package experiment

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
)

// world is the simulated federation: standardized train and test sets and
// the partition of the training examples into users.
type world struct {
	shape   logreg.Shape
	test    logreg.Dataset
	users   []logreg.Dataset // users[u] is user u's local data
	workers int
	seed    uint64
	// perUser is the examples per user; trainLen the training examples;
	// train, rawTest and nonIID what the partition was made from
	// (repartition).
	perUser, trainLen int
	train, rawTest    *dataset.Set
	nonIID            bool
	// source is the data before any preprocessing (featured maps it);
	// nil for a world not loaded by loadWorld or loadTaskWorld.
	source *sourceSets
	// note, when set, is printed before the results (e.g. a holdout
	// taken from the simulation rows).
	note string
}

// sourceSets are a world's training and test sets as loaded (pixels in
// [0, 1] for the image data sets), and whether loadWorld standardized
// them (the task worlds are used as their encoding gives them).
type sourceSets struct {
	train, test *dataset.Set
	standardize bool
}

// repartition returns the world with the same data split into users of
// perUser examples each (w itself when that is its split), for secure
// summation's population (secaggParams.perVolunteer).
func (w *world) repartition(perUser int, nonIID bool) (*world, error) {
	if perUser == w.perUser && nonIID == w.nonIID {
		return w, nil
	}
	nw, err := newWorld(w.train, w.rawTest, perUser, nonIID, w.seed, w.workers)
	if err == nil {
		nw.source = w.source
	}
	return nw, err
}

// loadWorld opens the named dataset (the embedded sample by default),
// standardizes features with statistics of the training part only, and
// splits the training examples into users of perUser examples each (IID, or
// two label shards per user when nonIID), deterministically from seed.
func loadWorld(name, dir string, perUser int, nonIID bool, seed uint64, workers int) (*world, error) {
	train, test, err := sample.Open(name, dir)
	if err != nil {
		return nil, fmt.Errorf("open dataset %q: %w", name, err)
	}
	w, err := standardizedWorld(train, test, perUser, nonIID, seed, workers)
	if err != nil {
		return nil, err
	}
	w.source = &sourceSets{train: train, test: test, standardize: true}
	return w, nil
}

// standardizedWorld is loadWorld's preprocessing of loaded sets:
// dataset.FitStandardizer on the training part, applied to both (the
// volunteers' client.StandardizeSplit), then newWorld.
func standardizedWorld(train, test *dataset.Set, perUser int, nonIID bool, seed uint64, workers int) (*world, error) {
	z, err := dataset.FitStandardizer(train)
	if err != nil {
		return nil, fmt.Errorf("standardize: %w", err)
	}
	if train, err = z.Apply(train); err != nil {
		return nil, fmt.Errorf("standardize train: %w", err)
	}
	if test, err = z.Apply(test); err != nil {
		return nil, fmt.Errorf("standardize test: %w", err)
	}
	return newWorld(train, test, perUser, nonIID, seed, workers)
}

// loadTaskWorld is loadWorld for a task definition file (task.Load,
// taskdata.Open): the task's simulation rows are the users' data and its
// public holdout the test set, both encoded by the task's declared ranges
// (a built-in task: its data set, standardized as loadWorld does).
func loadTaskWorld(path string, perUser int, nonIID bool, seed uint64, workers int) (*world, *task.Task, error) {
	tk, dir, err := task.Load(path)
	if err != nil {
		return nil, nil, err
	}
	s, err := taskdata.Open(tk, dir, "", "")
	if err != nil {
		return nil, nil, err
	}
	if s.Train == nil {
		return nil, nil, fmt.Errorf("task %q: the experiment runner needs public \"simulation\" rows to deal to users (without them, `aggregator task plan` gives the signal-to-noise per round instead)", tk.Name)
	}
	train, test := s.Train, s.Test
	if test == nil {
		// No public holdout: hold out a stratified fifth of the
		// simulation rows (seeded), and say so.
		k := max(1, train.Len()/5)
		if train, test, err = dataset.SplitSet(s.Train, k, noise.NewSeeded(mix(seed, tagHoldout))); err != nil {
			return nil, nil, fmt.Errorf("task %q: no holdout, and holding out %d of its %d simulation rows failed: %w", tk.Name, k, s.Train.Len(), err)
		}
	}
	w, err := newWorld(train, test, perUser, nonIID, seed, workers)
	if err != nil {
		return nil, nil, err
	}
	if s.Test == nil {
		w.note = fmt.Sprintf("task %q has no public holdout: accuracy is on %d of its %d simulation rows, held out (stratified, seeded) and never trained on", tk.Name, test.Len(), s.Train.Len())
	}
	w.source = &sourceSets{train: train, test: test}
	return w, tk, nil
}

// newWorld splits the (already preprocessed) training examples into users
// of perUser examples each.
func newWorld(train, test *dataset.Set, perUser int, nonIID bool, seed uint64, workers int) (*world, error) {
	var err error
	shape := logreg.Shape{Features: train.Features, Classes: train.Classes}
	if perUser < 1 || perUser > train.Len() {
		return nil, fmt.Errorf("examples per user must be in [1, %d], got %d", train.Len(), perUser)
	}
	nUsers := train.Len() / perUser
	src := noise.NewSeeded(mix(seed, tagPartition))
	var parts [][]int
	if nonIID {
		parts, err = dataset.PartitionByLabel(train.Y, nUsers, 2, src)
	} else {
		parts, err = dataset.PartitionIID(train.Len(), nUsers, src)
	}
	if err != nil {
		return nil, fmt.Errorf("partition %d examples into %d users: %w", train.Len(), nUsers, err)
	}
	w := &world{shape: shape, seed: seed, workers: workers, perUser: perUser, trainLen: train.Len(), train: train, rawTest: test, nonIID: nonIID}
	if w.workers < 1 {
		w.workers = runtime.GOMAXPROCS(0)
	}
	if w.test, err = logreg.NewDataset(shape, test.X, test.Y); err != nil {
		return nil, fmt.Errorf("test set: %w", err)
	}
	w.users = make([]logreg.Dataset, len(parts))
	for u, idx := range parts {
		s, err := train.Subset(idx)
		if err != nil {
			return nil, fmt.Errorf("user %d: %w", u, err)
		}
		if w.users[u], err = logreg.NewDataset(shape, s.X, s.Y); err != nil {
			return nil, fmt.Errorf("user %d: %w", u, err)
		}
	}
	return w, nil
}

// forEach runs fn(worker, i) for i in [0, n) on w.workers goroutines and
// returns the first error. worker identifies the goroutine so fn can use
// per-worker scratch state.
func (w *world) forEach(ctx context.Context, n int, fn func(worker, i int) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     int
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil || next >= n || ctx.Err() != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for k := 0; k < w.workers; k++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := fn(worker, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}(k)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// localUpdates trains every selected user locally from global and returns
// the updates (trained - global), one per user, in the order of users.
// User u's minibatch order in round r comes from its own seeded stream, so
// the result does not depend on scheduling. A simulated population larger
// than the partition (secure summation's check-in population) gives
// volunteer u the shard of user u mod len(w.users) with u's own stream.
func (w *world) localUpdates(ctx context.Context, global []float64, users []int, cfg logreg.TrainConfig, round int, tag uint64) ([][]float64, error) {
	trainers := make([]*logreg.Trainer, w.workers)
	for k := range trainers {
		t, err := logreg.NewTrainer(w.shape, cfg)
		if err != nil {
			return nil, fmt.Errorf("local training: %w", err)
		}
		trainers[k] = t
	}
	out := make([][]float64, len(users))
	err := w.forEach(ctx, len(users), func(worker, i int) error {
		u := users[i]
		src := noise.NewSeeded(mix(w.seed, tag, uint64(round), uint64(u)))
		upd, err := trainers[worker].Update(nil, global, w.users[u%len(w.users)], src)
		if err != nil {
			return fmt.Errorf("user %d: %w", u, err)
		}
		out[i] = upd
		return nil
	})
	return out, err
}

// Stream tags keep the seeded streams of different purposes apart.
const (
	tagPartition uint64 = iota + 1
	tagTrain
	tagClient
	tagRelay
	tagServer
	tagBudget
	tagCheckIn
	tagHoldout // appended: the tags before it keep their values
)

// mix derives a seed from a base seed and a path of integers (SplitMix64
// finalizer over the running state), so every (purpose, round, user) gets an
// independent-looking stream.
func mix(base uint64, parts ...uint64) uint64 {
	h := base ^ 0x9e3779b97f4a7c15
	for _, p := range parts {
		h ^= p + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}
