"""The cluster controller: leader election, ISR and replica assignment decisions."""
