"""Presentation of result records: the results frame and its selection (``frame``), ranking, the
leaderboard in every format, charts, the HTML report, and the text formatting they share."""
