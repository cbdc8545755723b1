"""The approval inbox: a server-rendered web app for approvers and auditors.

``fsm serve`` runs it (:func:`fsm.web.app.create_app`); accounts are managed with
``fsm users`` (:mod:`fsm.web.accounts`). It needs the ``web`` extra.
"""
