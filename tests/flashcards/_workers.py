"""Child-process bodies for the concurrency and crash tests (importable under spawn)."""

import os
from datetime import datetime, timedelta, timezone

from pecourse.flashcards.store import ProgressStore, make_scheduler

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def review_many(path, card_ids, n, worker):
    store = ProgressStore(path)
    scheduler = make_scheduler(enable_fuzzing=False)
    for k in range(n):
        card_id = card_ids[k % len(card_ids)]
        store.review(card_id, 3, now=T0 + timedelta(minutes=k, seconds=worker), scheduler=scheduler)


class _DiesMidReview(ProgressStore):
    def _write_log(self, conn, *args, **kwargs):
        # The new card state has been written inside the open transaction; die before
        # the log row and the COMMIT, as a killed kernel would.
        os._exit(17)


def die_mid_review(path, card_id):
    _DiesMidReview(path).review(card_id, 4, now=T0 + timedelta(days=3))
