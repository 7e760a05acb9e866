package api_test

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/axsched/ax/controller/api"
)

// openAPI is the API's OpenAPI document, loaded and validated once, and a
// router over it that matches any host (the tests' servers listen on
// random ports).
var openAPI = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	return doc, nil
})

var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openAPI()
	if err != nil {
		return nil, err
	}
	anyHost := *doc
	anyHost.Servers = nil
	return gorillamux.NewRouter(&anyHost)
})

// validateExchange checks one request of a test and its response against
// the OpenAPI document: the response must be documented for its route and
// status and match its schema; a request the document refuses must have
// been refused (4xx); a request on no documented route must have got 401,
// 403, 404 or 405.
func validateExchange(t *testing.T, req *http.Request, reqBody []byte, r resp) {
	t.Helper()
	router, err := openAPIRouter()
	if err != nil {
		t.Errorf("openapi.yaml: %v", err)
		return
	}
	req = req.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := router.FindRoute(req)
	if err != nil {
		if !slices.Contains([]int{401, 403, 404, 405}, r.status) {
			t.Errorf("openapi: %s %s is on no documented route (%v) but got %d: %s", req.Method, req.URL.Path, err, r.status, r.body)
		}
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && r.status < 400 {
		t.Errorf("openapi: the server answered %d to a request the document refuses: %s %s: %v", r.status, req.Method, req.URL, err)
	}
	if r.status < 400 {
		// kin-openapi does not refuse undocumented query parameters; the server does.
		for k := range req.URL.Query() {
			if route.Operation.Parameters.GetByInAndName(openapi3.ParameterInQuery, k) == nil &&
				route.PathItem.Parameters.GetByInAndName(openapi3.ParameterInQuery, k) == nil {
				t.Errorf("openapi: the server answered %d to %s %s with the undocumented query parameter %q", r.status, req.Method, req.URL, k)
			}
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.status, Header: r.header,
		Body: io.NopCloser(bytes.NewReader(r.body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("openapi: the response to %s %s does not match the document: %v\nbody: %s", req.Method, req.URL, err, r.body)
	}
}

// muxRoute is one route of the server: method and path as the OpenAPI
// document writes it ({idaction} expanded to {id}:action).
type muxRoute struct{ method, path string }

// serverRoutes reads the patterns the server registers (m.HandleFunc in
// server.go) and, for a pattern with {idaction}, the actions its handler
// compares the action with, from the package's source.
func serverRoutes(t *testing.T) []muxRoute {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(filepath.Dir(file), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	var handles []*ast.CallExpr
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		{
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					funcs[fd.Name.Name] = fd
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "HandleFunc" || sel.Sel.Name == "Handle") {
						handles = append(handles, c)
					}
				}
				return true
			})
		}
	}
	var out []muxRoute
	for _, c := range handles {
		lit, ok := c.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Fatalf("%s: route pattern is not a string literal; write it out so that this test can read it", fset.Position(c.Pos()))
		}
		pattern, _ := strconv.Unquote(lit.Value)
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			t.Fatalf("%s: pattern %q has no method", fset.Position(c.Pos()), pattern)
		}
		if !strings.HasSuffix(path, "/{idaction}") {
			out = append(out, muxRoute{method, path})
			continue
		}
		sel, ok := c.Args[1].(*ast.SelectorExpr)
		if !ok || funcs[sel.Sel.Name] == nil {
			t.Fatalf("%s: the handler of %q is not a method of this package", fset.Position(c.Pos()), pattern)
		}
		actions := handlerActions(funcs[sel.Sel.Name])
		if len(actions) == 0 {
			t.Fatalf("%s handles %q but compares action with no string literal", sel.Sel.Name, pattern)
		}
		for _, a := range actions {
			out = append(out, muxRoute{method, strings.TrimSuffix(path, "{idaction}") + "{id}:" + a})
		}
	}
	return out
}

// handlerActions returns the string literals a handler compares its
// action variable with: `case "pause", "resume":` of `switch action`, and
// `action == "x"` or `action != "x"`.
func handlerActions(fd *ast.FuncDecl) []string {
	seen := map[string]bool{}
	isAction := func(e ast.Expr) bool { id, ok := e.(*ast.Ident); return ok && id.Name == "action" }
	add := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			seen[s] = true
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SwitchStmt:
			if n.Tag != nil && isAction(n.Tag) {
				for _, st := range n.Body.List {
					for _, e := range st.(*ast.CaseClause).List {
						add(e)
					}
				}
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && isAction(n.X) {
				add(n.Y)
			}
		}
		return true
	})
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIRoutes: every route and action the server registers is in the
// OpenAPI document with its method, and every documented operation is one
// the server has, so that neither drifts from the other.
func TestOpenAPIRoutes(t *testing.T) {
	doc, err := openAPI()
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	documented := map[muxRoute]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[muxRoute{method, path}] = true
		}
	}
	routes := serverRoutes(t)
	if len(routes) < 15 {
		t.Fatalf("found only %d routes in the server's source: %v", len(routes), routes)
	}
	served := map[muxRoute]bool{}
	for _, r := range routes {
		served[r] = true
		if !documented[r] {
			t.Errorf("%s %s is served but not in controller/api/openapi.yaml", r.method, r.path)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("%s %s is in controller/api/openapi.yaml but the server has no such route", r.method, r.path)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			if _, ok := op.Responses.Map()["401"]; !ok && (op.Security == nil || len(*op.Security) > 0) {
				t.Errorf("%s %s needs a token but documents no 401", method, path)
			}
			if _, ok := op.Responses.Map()["403"]; !ok && method != http.MethodGet && (op.Security == nil || len(*op.Security) > 0) {
				t.Errorf("%s %s needs an admin token but documents no 403", method, path)
			}
		}
	}
}

// TestOpenAPIServed: the document is served without a token, as YAML, and
// is the one in the repository; a token-protected route still needs one.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, api.Token{Name: "ops", Token: "0123456789abcdef-ops", Role: api.RoleAdmin})
	r := e.do("GET", "/v1/openapi.yaml", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /v1/openapi.yaml without a token: %d %q", r.status, r.header.Get("Content-Type"))
	}
	if !bytes.Equal(r.body, api.OpenAPI()) {
		t.Error("GET /v1/openapi.yaml differs from controller/api/openapi.yaml")
	}
	if _, err := openapi3.NewLoader().LoadFromData(r.body); err != nil {
		t.Errorf("served document does not load: %v", err)
	}
	if r := e.do("GET", "/v1/openapi.yaml?x=1", nil); r.status != http.StatusBadRequest || r.apiErr(t).Field != "x" {
		t.Errorf("GET /v1/openapi.yaml?x=1: %d %s, want 400 on field x", r.status, r.body)
	}
	if r := e.do("GET", "/v1/jobs", nil); r.status != http.StatusUnauthorized {
		t.Errorf("GET /v1/jobs without a token: %d, want 401", r.status)
	}
}
