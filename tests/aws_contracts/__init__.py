"""AWS's contracts enforced where the tests call AWS: IAM (every call a handler or the state machine
makes, checked against its role in the translated template), service limits and account quotas.

See ``docs/architecture.md`` ("AWS contracts in the tests")."""
