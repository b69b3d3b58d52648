"""Studies built on ``uss_stream``: the paper's reproduction and the delay and shared-learning studies.

They write ``docs/evidence/results.md`` and its figures (``python -m studies.reproduce``) and need the
``[paper]`` and ``[plot]`` extras; they are not part of the installed library.
"""
