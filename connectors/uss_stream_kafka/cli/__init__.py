"""The command line: `uss-stream kafka`, its settings table, `kafka status`, the demo cascade, exit codes."""
