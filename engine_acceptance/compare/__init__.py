"""Two engines side by side on the identical request set, as the field reports compare them."""
