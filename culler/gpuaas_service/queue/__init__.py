"""The queue answers: each user's pending GPU work with its Kueue positions (``api/queue``)."""
