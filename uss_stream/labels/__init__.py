"""What labels say: label evidence, audit relations, the label budget, the WD monitor."""
