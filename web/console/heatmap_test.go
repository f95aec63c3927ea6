package console

import (
	"bytes"
	"fmt"
	"image/png"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestScatterHeatmaps: for a model over scatter1 (17 channels of 7 x 7)
// each class's heatmap is a 7 x 7 picture of places, a place's value the
// sum of the class's centred weights over the 17 channels there. Class c
// gains +1 in every channel at place 10+c: its own place is full red,
// the other classes' places blue, and a place where two channels cancel
// (+2 in channel 0, -2 in channel 5, for every class alike) and the
// common component are white; the PNG is 7 x 7.
func TestScatterHeatmaps(t *testing.T) {
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	l := ModelLayout(tk, 833)
	if l != (features.Layout{Channels: 17, Height: 7, Width: 7}) {
		t.Fatalf("the digits task's layout %+v, want 17 x 7 x 7", l)
	}
	const f = 833
	params := make([]float64, 10*f+10)
	for c := range 10 {
		for i := range f {
			params[c*f+i] = float64(i%13) * 7 // the same for every class
		}
		for ch := range 17 {
			params[c*f+ch*49+10+c] += 1
		}
		params[c*f+0*49+40] += 2 * float64(c) // cancels within the place...
		params[c*f+5*49+40] -= 2 * float64(c) // ...whatever the class
	}
	m := ModelView{Features: f, Classes: 10, Params: params}
	for c := range 10 {
		b, ok, err := HeatmapPNG(tk, m, c)
		if !ok || err != nil {
			t.Fatalf("class %d: %v %v", c, ok, err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds().Dx() != 7 || img.Bounds().Dy() != 7 {
			t.Fatalf("class %d: %v image", c, img.Bounds())
		}
		for i := range 49 {
			r, g, bl, _ := img.At(i%7, i/7).RGBA()
			got := fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, bl>>8)
			switch {
			case i == 10+c && got != "#b2182b":
				t.Errorf("class %d: its own place is %s, want full red", c, got)
			case i >= 10 && i < 20 && i != 10+c && !(bl > r):
				t.Errorf("class %d: place %d (another class's) is %s, want blue", c, i, got)
			case (i < 10 || i >= 20) && got != "#ffffff":
				t.Errorf("class %d: place %d is %s, want white", c, i, got)
			}
		}
	}
	if _, ok, _ := HeatmapPNG(tk, m, 10); ok {
		t.Error("a heatmap of class 10 of 10")
	}
	// Without the layout the same model is drawn per feature (29 x 29).
	if h := Heatmaps(m); len(h) != 10 || h[0].Cols != 29 || len(h[0].Cells) != f {
		t.Errorf("no layout: %d maps of %d columns", len(h), h[0].Cols)
	}
}

// TestModelLayout: the digits without a map (or no task) are one 28 x 28
// channel; a task that is not an image, or a layout that does not match
// the model's features, has none.
func TestModelLayout(t *testing.T) {
	if l := ModelLayout(nil, 784); l != (features.Layout{Channels: 1, Height: 28, Width: 28}) {
		t.Errorf("no task: %+v", l)
	}
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	if l := ModelLayout(tk, 784); l != (features.Layout{}) {
		t.Errorf("the scatter1 task for a model of 784 features: %+v", l)
	}
	if l := ModelLayout(surveyTask(t), 3); l != (features.Layout{}) {
		t.Errorf("a survey: %+v", l)
	}
}

// TestDashboardScatterHeatmaps: the digits task's dashboard (scatter1,
// 833 features) shows the heatmaps as 7 x 7 images with the sentence that
// says what they are, and the drawing pad (784 pixels in).
func TestDashboardScatterHeatmaps(t *testing.T) {
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	d := DashboardData{Model: ModelView{Features: 833, Classes: 10, Params: make([]float64, 8340)},
		Task: &TaskView{Def: tk, AccuracySource: "public_holdout"}, JoinURL: "http://127.0.0.1:8081/"}
	page := renderDashboard(t, d)
	what := upTo(page, "heatmaps-what", "</p>")
	if !strings.Contains(openTag(page, "heatmaps-what"), `data-channels="17"`) || !strings.Contains(what, "7 × 7 grid of places") ||
		!strings.Contains(what, "17 features at that place, added up") {
		t.Errorf("the heatmaps' sentence: %q", what)
	}
	if n := strings.Count(page, `width="7" height="7"`); n != 10 {
		t.Errorf("%d heatmap images of 7 x 7, want 10", n)
	}
	if !strings.Contains(page, `id="try-canvas"`) || strings.Contains(page, `id="coef-bars"`) {
		t.Error("the digits task's dashboard has no drawing pad, or has bars")
	}
	d = DashboardData{Model: ModelView{Features: 784, Classes: 10, Params: make([]float64, 7850)}}
	page = renderDashboard(t, d)
	if !strings.Contains(openTag(page, "heatmaps-what"), `data-channels="1"`) || strings.Count(page, `width="28" height="28"`) != 10 {
		t.Error("the pixels model's heatmaps are not 28 x 28 pixels")
	}
}
