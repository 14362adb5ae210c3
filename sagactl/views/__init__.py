"""Views: what sagactl.operations read, turned into what an operator needs. Pure: no AWS call,
no printing (sagactl.commands prints them)."""
