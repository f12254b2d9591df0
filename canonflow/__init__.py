"""canonflow, as a library: the consumer of `agents.canonical` and `agents.chat`, and
the records' types.

    from canonflow import Consumer, Gap, Unknown
    from canonflow.events import TurnCompleted

Installed, `canonflow` is the distribution's only top-level name: the repository's
`topics`, `adapters` and `pipeline` are shipped inside it as `canonflow.topics`,
`canonflow.adapters` and `canonflow.pipeline` (setup.py says how). In the repository
they stay top-level packages, and this package imports them from there.
"""

from pipeline.cluster.consumer import Consumer
from topics.consumer import Gap, Unknown

__all__ = ["Consumer", "Gap", "Unknown"]
