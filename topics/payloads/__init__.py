"""The canonical contract's vocabulary and payloads, by family: `base` (the words and
the envelope's parts), `session` (session.* and thread.*), `turn` (turn.*, item.*,
content.delta), `request` (request.*, user-input.*, task.*, hook.*, tool.*), `runtime`
(what a runtime says about itself). Import them from topics.canonical, which re-exports
every name of the contract with the envelope and the tagged union."""
