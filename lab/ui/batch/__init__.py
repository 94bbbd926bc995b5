"""The Batch tab: runs over the replay, and the cluster sweep."""
