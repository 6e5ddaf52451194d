"""certificates package."""
