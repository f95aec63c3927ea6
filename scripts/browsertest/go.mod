module github.com/blanket-fl/blanket/scripts/browsertest

go 1.26.0

replace github.com/blanket-fl/blanket => ../..

require (
	github.com/blanket-fl/blanket v0.0.0-00010101000000-000000000000
	github.com/chromedp/cdproto v0.159.2
	github.com/chromedp/chromedp v0.23.0
	rsc.io/qr v0.2.0
)

require (
	github.com/a-h/templ v0.3.977 // indirect
	github.com/andybalholm/brotli v1.1.0 // indirect
	github.com/cloudflare/circl v1.6.5 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
