// Package api is the HTTP JSON API of the ax controller (docs/architecture.md: A job's way, Security model).
//
// Routes (Go 1.22 method patterns):
//
//	POST   /v1/jobs                       create a job (201; 409 already_exists with the id)
//	POST   /v1/jobs:batch                 create up to 1000 jobs, one result each (200)
//	GET    /v1/jobs                       list (name, handler, agent, group, paused, limit, after)
//	GET    /v1/jobs/{id}                  get
//	PUT    /v1/jobs/{id}                  update
//	DELETE /v1/jobs/{id}                  delete (204)
//	POST   /v1/jobs/{id}:pause|:resume|:trigger
//	GET    /v1/executions                 list (state, job, agent, limit, after)
//	GET    /v1/executions/{id}            get
//	POST   /v1/executions/{id}:retry|:cancel
//	GET    /v1/agents                     list
//	GET    /healthz                       the process is alive (no auth)
//	GET    /readyz                        the backend is ready (no auth)
//	GET    /metrics                       Prometheus metrics (auth when enabled)
//	GET    /v1/openapi.yaml               the OpenAPI 3 document of these routes (no auth)
//
// Every error is a apiv1.Error JSON body. Bearer tokens (constant-time
// compared) carry a role: admin may call everything, read only GET. Every
// mutating call writes one audit log line naming the token, never the token
// itself. The handler depends on the Backend interface, which
// *controller.Controller satisfies.
package api
