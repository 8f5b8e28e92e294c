"""The two small documents and five questions the evidence-vector tests share
(``test_evidence_vectors.py``, ``test_evidence_on_demand.py``)."""

POLICY = """# Expense policy

Submit every expense report within 30 days of the purchase. Late reports need your manager's approval.
The finance team reimburses approved reports with the next salary payment.

## Travel

- Meals are covered up to 60 euros per day in Europe.
- Taxis are reimbursed only when no train or bus runs.

| Item | Limit |
|---|---|
| Hotel | 150 euros a night |

The lighthouse stood on the island of Pharos. It was about one hundred metres tall.
"""
GUIDE = """The Lisbon office opens at 8:00 and closes at 19:00 on weekdays. Visitors sign in at the front
desk on the ground floor. Bikes can be parked in the courtyard. They must not block the fire exit.
"""
QUESTIONS = [
    "How long do I have to hand in an expense report?",
    "What is the meal allowance in Europe?",
    "How tall was the lighthouse?",
    "When does the Lisbon office open?",
    "Where can I leave my bike?",
]
