package redlock

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
)

// RouteDriverLogs sends go-redis's own log lines (dial failures, pool
// events) to logger at debug level instead of the standard library's
// logger on stderr. go-redis's logger is process-wide, so only main calls
// this.
func RouteDriverLogs(logger hclog.Logger) {
	redis.SetLogger(driverLogger{logger})
}

type driverLogger struct{ log hclog.Logger }

func (l driverLogger) Printf(_ context.Context, format string, v ...any) {
	if l.log.IsDebug() {
		l.log.Debug("driver", "message", strings.TrimSpace(fmt.Sprintf(format, v...)))
	}
}
