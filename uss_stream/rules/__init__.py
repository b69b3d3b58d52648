"""The set test and its bounds: confidence bounds, the selection rule, membership."""
