"""Task definitions (MDP cores) shared by every simulator backend; nothing here imports a simulator."""
