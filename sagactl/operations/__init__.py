"""Operations on a target (sagactl.target): what sagactl reads from and writes to AWS.

One module per resource (executions, records, queue, functions) and one per composite
(case_view, redrive, escalations). No text and no argument parsing here (sagactl.commands); the
rules that turn what was read into a view are in sagactl.views.
"""
