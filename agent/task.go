package agent

import "github.com/axsched/ax/agent/handler"

// Task is one attempt of an execution, as a handler sees it (handler.Task).
type Task = handler.Task

// Result is a handler's answer (handler.Result): Code 0 is success; any
// other code is a failure, and Retryable says whether trying again can
// help (HTTP 503 yes, 400 no). A handler that returns after its context
// ended is recorded as timed out or cancelled, whatever it returns.
type Result = handler.Result

// HandlerFunc runs one attempt (handler.Func). It must honour ctx: the
// attempt's timeout and cancel commands end it.
type HandlerFunc = handler.Func
