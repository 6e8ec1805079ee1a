"""The crash harness: prompts run while the worker or the Temporal dev server is SIGKILLed at random moments."""
