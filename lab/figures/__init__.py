"""The lab's plotly figures: the store's plots (leaderboard, score vs size, precision vs recall, speed, buckets,
equiv F1) and the checkpoint series with its intervals and P(best). The UI draws them; nothing below it does."""
