"""The collision model at scale, pure: Clos fabrics of any size, flows placed by a hash
(as the census measured the kernel's) or sprayed, max-min fair rates, and a synchronous
step's time and efficiency over seeded draws."""
