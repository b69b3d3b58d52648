"""``python -m uss_stream``: the ``uss-stream`` command (:func:`uss_stream.commands.cli.main`)."""

from uss_stream.commands.cli import main

raise SystemExit(main())
