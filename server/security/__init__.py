"""Security: authentication (SASL) and authorization (ACLs), sans-IO."""
