"""What several backends share, so that no backend imports another: ``reference_state.ReferenceStateInit`` (the
reference-state initialization on a MuJoCo model that the embedded env and mjlab's tracking command both use)."""
