"""The realtime data pipeline: acquisition → Samsa → Spark → storage → dashboard (`contract.py`)."""
