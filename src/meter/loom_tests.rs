// loom models below
