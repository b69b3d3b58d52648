"""The command line: `uss-stream kafka`, its settings table, the demo cascade, exit codes."""
