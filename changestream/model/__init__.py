"""The change model: changes, transactions, positions, GTID progress, errors."""
