package console

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/task"
)

// layouts caches ModelLayout's feature maps by name (a scattering builds
// its filters when parsed).
var layouts sync.Map // map name -> features.FeatureMap

// ModelLayout is how the n features of t's model are arranged when they
// are images: the output layout of t's feature map (features.LayoutOf)
// for an image task (built in, a square number of inputs), or one channel
// of the square image for a model over its pixels (t nil: the digits).
// The zero Layout when they are not images.
func ModelLayout(t *task.Task, n int) features.Layout {
	name, in := "identity", n
	if t != nil {
		if t.Source != task.SourceBuiltin {
			return features.Layout{}
		}
		if r := t.Recipe().FeatureMap; r != "" {
			name = r
		}
		in = t.Inputs()
	}
	m, ok := layouts.Load(name)
	if !ok {
		fm, err := features.Parse(name)
		if err != nil {
			return features.Layout{}
		}
		m, _ = layouts.LoadOrStore(name, fm)
	}
	l, ok := features.LayoutOf(m.(features.FeatureMap), in)
	if !ok || l.Size() != n {
		return features.Layout{}
	}
	return l
}

// HeatmapLayout is ModelLayout of the dashboard's task and model.
func (d DashboardData) HeatmapLayout() features.Layout {
	var t *task.Task
	if d.Task != nil {
		t = d.Task.Def
	}
	return ModelLayout(t, d.Model.Features)
}

// HeatmapPNG is class's heatmap of m (Heatmaps, laid out for task t:
// ModelLayout) as a PNG; ok is false when m has no such class.
func HeatmapPNG(t *task.Task, m ModelView, class int) (b []byte, ok bool, err error) {
	m.Layout = ModelLayout(t, m.Features)
	maps := Heatmaps(m)
	if class < 0 || class >= len(maps) {
		return nil, false, nil
	}
	b, err = maps[class].PNG()
	return b, true, err
}

// ServeHeatmap answers GET /heatmaps/{file} with file "{class}.png":
// class's heatmap of m (HeatmapPNG, laid out for task t) as a small PNG,
// 404 for another file or class. The page asks for ?v=ROUND.RESETS; when
// that is version, the current model's, the image may be cached, since
// that version never changes.
func ServeHeatmap(w http.ResponseWriter, r *http.Request, t *task.Task, m ModelView, version string) {
	name, ok := strings.CutSuffix(r.PathValue("file"), ".png")
	class, err := strconv.Atoi(name)
	if !ok || err != nil {
		http.NotFound(w, r)
		return
	}
	b, ok, err := HeatmapPNG(t, m, class)
	if !ok {
		http.NotFound(w, r)
		return
	} else if err != nil {
		http.Error(w, "heatmap failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("v") == version {
		h.Set("Cache-Control", "public, max-age=3600")
	} else {
		h.Set("Cache-Control", "no-store")
	}
	w.Write(b)
}
